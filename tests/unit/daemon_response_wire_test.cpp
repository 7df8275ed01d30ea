// sluiced writes its responses itself (response_wire.hpp): the bytes must be exactly those
// of Beast's serializer, which every HTTP client of the daemon has been reading.
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include <boost/beast/http/write.hpp>

#include "response_wire.hpp"
#include "service.hpp"

namespace sluice::daemon {
namespace {

std::string beast_bytes(const http_response& res) {
  std::ostringstream os;
  os << res;
  return os.str();
}

std::string wire_bytes(const http_response& res) {
  std::string out = "kept:";
  append_wire_response(res, out);
  EXPECT_EQ(out.rfind("kept:", 0), 0u) << "the output is appended, not assigned";
  return out.substr(5);
}

http_response prepared(http_response res, bool keep_alive) {
  res.keep_alive(keep_alive);
  res.prepare_payload();
  return res;
}

TEST(DaemonResponseWire, MatchesBeastForACheckAnswer) {
  http_response res{bhttp::status::ok, 11};
  res.set(bhttp::field::content_type, "application/json");
  res.set(bhttp::field::cache_control, "no-store");
  res.set("X-RateLimit-Limit", "100");
  res.set("RateLimit-Policy", R"("bench";q=100;w=1)");
  res.body() = R"({"allowed":true})"
               "\n";
  const auto r = prepared(std::move(res), true);
  EXPECT_EQ(wire_bytes(r), beast_bytes(r));
  EXPECT_EQ(wire_bytes(r).rfind("HTTP/1.1 200 OK\r\n", 0), 0u);
}

TEST(DaemonResponseWire, MatchesBeastForStatusesVersionsAndClose) {
  for (unsigned status : {204u, 400u, 404u, 413u, 429u, 431u, 503u}) {
    for (unsigned version : {10u, 11u}) {
      for (bool keep_alive : {true, false}) {
        http_response res{static_cast<bhttp::status>(status), version};
        res.set(bhttp::field::content_type, "application/problem+json");
        if (status != 204) res.body() = "{\"status\":" + std::to_string(status) + "}\n";
        const auto r = prepared(std::move(res), keep_alive);
        EXPECT_EQ(wire_bytes(r), beast_bytes(r))
            << status << " HTTP/" << version << " keep-alive " << keep_alive;
      }
    }
  }
}

TEST(DaemonResponseWire, MatchesBeastForAHeadAnswerAndACustomReason) {
  // A HEAD answer keeps the GET answer's Content-Length without the body.
  http_response head{bhttp::status::ok, 11};
  head.set(bhttp::field::content_type, "text/plain");
  head.content_length(1234);
  EXPECT_EQ(wire_bytes(head), beast_bytes(head));
  EXPECT_NE(wire_bytes(head).find("Content-Length: 1234\r\n\r\n"), std::string::npos);

  http_response custom{bhttp::status::too_many_requests, 11};
  custom.reason("Slow Down");
  custom.body() = "x";
  const auto r = prepared(std::move(custom), true);
  EXPECT_EQ(wire_bytes(r), beast_bytes(r));
  EXPECT_EQ(wire_bytes(r).rfind("HTTP/1.1 429 Slow Down\r\n", 0), 0u);
}

}  // namespace
}  // namespace sluice::daemon

namespace sluice::daemon {
namespace {

// Whatever a value holds, it cannot end its field: no response splitting, no NUL.
TEST(DaemonResponseWire, ControlBytesInAFieldValueBecomeSpaces) {
  http_response res{boost::beast::http::status::ok, 11};
  res.set("X-Echo", std::string("a\r\nSet-Cookie: x=1\0\x7f\tb\xff", 23));
  res.body() = "ok";
  res.prepare_payload();
  const auto wire = wire_bytes(res);
  EXPECT_NE(wire.find(std::string("X-Echo: a  Set-Cookie: x=1  \tb\xff\r\n")), std::string::npos)
      << wire;
  EXPECT_EQ(wire.find("\r\nSet-Cookie"), std::string::npos);
}

}  // namespace
}  // namespace sluice::daemon
