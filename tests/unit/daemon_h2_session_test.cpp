// sluiced's HTTP/2 gRPC server without sockets or clocks: frames built by hand (and HPACK by
// nghttp2's encoder) go into h2_session, the frames it answers with are parsed back. A valid
// call and its trailers, trailers-only errors, deadlines and slow requests on explicit time,
// and each bound: concurrent streams, header lists across CONTINUATIONs, CONTINUATION
// floods, message size, rapid reset, GOAWAY on shutdown.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "grpc/h2_session.hpp"
#include "support/h2_frames.hpp"

namespace sluice::daemon::grpc {
namespace {

namespace h2 = sluice::test::h2;
using namespace std::chrono_literals;
using clock_type = h2_session::clock;

constexpr std::string_view method = "/test.Service/Method";

// A session and a client: what the handler got, and the server's frames.
class harness {
 public:
  explicit harness(h2_options opts = {}, bool answer_inline = true)
      : session_(opts, [this, answer_inline](const h2_call& c) {
          calls.push_back({c.stream_id, std::string(c.path), std::string(c.message), c.deadline});
          if (answer_inline)
            session_.answer(c.stream_id, status_code::ok, {}, "re:" + calls.back().message);
        }) {
    send(h2::preface());
  }

  struct seen {
    std::int32_t stream;
    std::string path;
    std::string message;
    std::optional<clock_type::time_point> deadline;
  };

  // Sends `bytes` (at time `at`) and takes everything the session has to say.
  bool send(const std::string& bytes, clock_type::time_point at = t0) {
    const bool ok =
        session_.receive(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size(), at);
    pump();
    return ok;
  }
  void pump() {
    std::string out;
    EXPECT_TRUE(session_.take_output(out, 1 << 20) || !session_.alive());
    client.feed(out);
  }

  static inline const clock_type::time_point t0{std::chrono::hours{1}};
  h2::peer client;
  std::vector<seen> calls;
  h2_session& session() { return session_; }

 private:
  h2_session session_;
};

TEST(H2SessionTest, AnswersACallWithHeadersDataAndTrailers) {
  harness h;
  ASSERT_TRUE(h.send(h.client.call(1, method, "hello")));
  ASSERT_EQ(h.calls.size(), 1u);
  EXPECT_EQ(h.calls[0].path, method);
  EXPECT_EQ(h.calls[0].message, "hello");
  EXPECT_FALSE(h.calls[0].deadline.has_value());
  const auto& blocks = h.client.headers_of().at(1);
  ASSERT_EQ(blocks.size(), 2u);  // response headers, then trailers
  EXPECT_EQ(blocks[0].at(":status"), "200");
  EXPECT_EQ(blocks[0].at("content-type"), "application/grpc");
  EXPECT_EQ(blocks[1].at("grpc-status"), "0");
  EXPECT_EQ(h.client.data_of(1), h2::grpc_message("re:hello"));
  EXPECT_EQ(h.session().open_streams(), 0u);
  EXPECT_TRUE(h.session().alive());
}

TEST(H2SessionTest, ErrorsAreTrailersOnlyWithAPercentEncodedMessage) {
  harness h({}, false);
  ASSERT_TRUE(h.send(h.client.call(1, method, "x")));
  h.session().answer(1, status_code::unimplemented, "no such method: 100% \xff");
  h.pump();
  const auto& blocks = h.client.headers_of().at(1);
  ASSERT_EQ(blocks.size(), 1u);
  EXPECT_EQ(blocks[0].at(":status"), "200");
  EXPECT_EQ(blocks[0].at("grpc-status"), "12");
  EXPECT_EQ(blocks[0].at("grpc-message"), "no such method: 100%25 %FF");
  EXPECT_EQ(h.client.data_of(1), "");
  // A second answer (the backend after a deadline, say) is dropped.
  h.session().answer(1, status_code::ok, {}, "late");
  h.pump();
  EXPECT_EQ(h.client.headers_of().at(1).size(), 1u);
}

TEST(H2SessionTest, DeadlineFromGrpcTimeoutAnswersDeadlineExceeded) {
  harness h({}, false);
  ASSERT_TRUE(h.send(h.client.call(1, method, "x", {{"grpc-timeout", "100m"}})));
  ASSERT_EQ(h.calls.size(), 1u);
  ASSERT_TRUE(h.calls[0].deadline.has_value());
  EXPECT_EQ(*h.calls[0].deadline, harness::t0 + 100ms);
  EXPECT_EQ(h.session().next_deadline(), harness::t0 + 100ms);
  h.session().expire(harness::t0 + 99ms);
  h.pump();
  EXPECT_EQ(h.client.header(1, "grpc-status"), "");
  h.session().expire(harness::t0 + 100ms);
  h.pump();
  EXPECT_EQ(h.client.header(1, "grpc-status"), "4");
  h.session().answer(1, status_code::ok, {}, "too late");
  h.pump();
  EXPECT_EQ(h.client.data_of(1), "");
  EXPECT_FALSE(h.session().next_deadline().has_value());
}

TEST(H2SessionTest, ParsesGrpcTimeoutUnits) {
  EXPECT_EQ(parse_grpc_timeout("5S"), std::chrono::seconds{5});
  EXPECT_EQ(parse_grpc_timeout("20m"), std::chrono::milliseconds{20});
  EXPECT_EQ(parse_grpc_timeout("1H"), std::chrono::hours{1});
  EXPECT_EQ(parse_grpc_timeout("7n"), std::chrono::nanoseconds{7});
  EXPECT_FALSE(parse_grpc_timeout("123456789S"));  // 9 digits
  // 8 digits of hours would overflow nanoseconds: capped at 10^18 ns (about 31 years).
  EXPECT_EQ(parse_grpc_timeout("99999999H"), std::chrono::nanoseconds{1'000'000'000'000'000'000});
  EXPECT_FALSE(parse_grpc_timeout("5"));
  EXPECT_FALSE(parse_grpc_timeout("5x"));
  EXPECT_FALSE(parse_grpc_timeout("-5S"));
}

TEST(H2SessionTest, ARequestThatNeverEndsIsResetAfterTheRequestTimeout) {
  h2_options o;
  o.request_timeout = 10s;
  harness h(o);
  ASSERT_TRUE(h.send(h.client.headers_frame(1, h2::grpc_request_headers(method))));
  EXPECT_EQ(h.session().open_streams(), 1u);
  h.session().expire(harness::t0 + 9s);
  h.pump();
  EXPECT_EQ(h.client.error_of(h2::rst_stream, 1), -1);
  h.session().expire(harness::t0 + 10s);
  h.pump();
  EXPECT_EQ(h.client.error_of(h2::rst_stream, 1), NGHTTP2_CANCEL);
  EXPECT_TRUE(h.calls.empty());
}

TEST(H2SessionTest, RefusesStreamsPastMaxConcurrentStreams) {
  h2_options o;
  o.max_concurrent_streams = 3;
  harness h(o, false);
  // Before the client acknowledges the server's SETTINGS, a stream past the limit is refused.
  std::string bytes;
  for (std::int32_t id = 1; id <= 9; id += 2) {
    bytes += h.client.headers_frame(id, h2::grpc_request_headers(method));
  }
  ASSERT_TRUE(h.send(bytes));
  EXPECT_EQ(h.session().open_streams(), 3u);
  EXPECT_EQ(h.client.error_of(h2::rst_stream, 7), NGHTTP2_REFUSED_STREAM);
  EXPECT_EQ(h.client.error_of(h2::rst_stream, 9), NGHTTP2_REFUSED_STREAM);
  EXPECT_TRUE(h.session().alive());
  // After, it breaks a limit the client agreed to: the connection ends.
  h.send(h2::settings_ack() + h.client.headers_frame(11, h2::grpc_request_headers(method)));
  EXPECT_EQ(h.client.error_of(h2::goaway), NGHTTP2_PROTOCOL_ERROR);
  EXPECT_FALSE(h.session().alive());
}

// A header block of `fields` literal fields of 100-byte values, over HEADERS and
// `continuations` CONTINUATION frames.
std::string split_headers(h2::peer& p, std::int32_t id, int fields, int continuations) {
  std::string block = p.block(h2::grpc_request_headers(method));
  for (int i = 0; i < fields; ++i) {
    block += h2::literal_field("x-pad-" + std::to_string(i), std::string(100, 'v'));
  }
  const std::size_t piece = block.size() / static_cast<std::size_t>(continuations + 1) + 1;
  std::string out;
  for (int i = 0; i <= continuations; ++i) {
    const auto part =
        block.substr(std::min(block.size(), static_cast<std::size_t>(i) * piece), piece);
    const bool last = i == continuations;
    out += h2::frame_bytes(i == 0 ? h2::headers : h2::continuation, last ? h2::end_headers : 0, id,
                           part);
  }
  return out;
}

TEST(H2SessionTest, AHeaderListOverTheLimitAcrossContinuationsResetsTheStream) {
  h2_options o;
  o.max_header_list_bytes = 8 * 1024;
  harness h(o);
  // About 12 KB of fields in a HEADERS and three CONTINUATIONs.
  ASSERT_TRUE(h.send(split_headers(h.client, 1, 90, 3)));
  EXPECT_NE(h.client.error_of(h2::rst_stream, 1), -1);
  EXPECT_TRUE(h.calls.empty());
  // The connection serves on.
  ASSERT_TRUE(h.send(h.client.call(3, method, "after")));
  ASSERT_EQ(h.calls.size(), 1u);
  EXPECT_EQ(h.client.header(3, "grpc-status"), "0");
}

TEST(H2SessionTest, AContinuationFloodEndsTheConnection) {
  h2_options o;
  o.max_continuations = 8;
  harness h(o);
  // 20 CONTINUATIONs of a small block: within the header list limit, past the frame count.
  EXPECT_FALSE(h.send(split_headers(h.client, 1, 2, 20)) && h.session().alive());
  EXPECT_NE(h.client.error_of(h2::goaway), -1);
  EXPECT_FALSE(h.session().alive());
  EXPECT_TRUE(h.calls.empty());
}

TEST(H2SessionTest, AMessageOverTheLimitIsResourceExhausted) {
  h2_options o;
  o.max_message_bytes = 1024;
  harness h(o);
  ASSERT_TRUE(h.send(h.client.call(1, method, std::string(1025, 'm'))));
  EXPECT_EQ(h.client.header(1, "grpc-status"), "8");
  // The prefix alone, announcing 1 MB, is enough to refuse it; the rest is dropped.
  ASSERT_TRUE(h.send(h.client.headers_frame(3, h2::grpc_request_headers(method)) +
                     h2::frame_bytes(h2::data, 0, 3, std::string(1, '\0') + h2::u32(1 << 20))));
  EXPECT_EQ(h.client.header(3, "grpc-status"), "8");
  ASSERT_TRUE(h.send(h2::frame_bytes(h2::data, h2::end_stream, 3, std::string(1000, 'm'))));
  EXPECT_TRUE(h.calls.empty());
  ASSERT_TRUE(h.send(h.client.call(5, method, std::string(1024, 'm'))));
  EXPECT_EQ(h.calls.size(), 1u);
  // Refused early and never ended: reset at the request timeout, not held.
  ASSERT_TRUE(h.send(h.client.headers_frame(7, h2::grpc_request_headers(method)) +
                     h2::frame_bytes(h2::data, 0, 7, std::string(1, '\0') + h2::u32(1 << 20))));
  EXPECT_EQ(h.client.header(7, "grpc-status"), "8");
  EXPECT_EQ(h.session().open_streams(), 1u);
  h.session().expire(harness::t0 + o.request_timeout);
  h.pump();
  EXPECT_EQ(h.client.error_of(h2::rst_stream, 7), NGHTTP2_CANCEL);
  EXPECT_EQ(h.session().open_streams(), 0u);
}

TEST(H2SessionTest, RapidResetEndsTheConnectionWithGoaway) {
  h2_options o;
  o.stream_reset_burst = 10;
  o.stream_reset_rate = 1;
  harness h(o);
  std::string bytes;
  for (std::int32_t id = 1; id < 2 * 50; id += 2) {
    bytes += h.client.headers_frame(id, h2::grpc_request_headers(method)) + h2::rst(id);
  }
  h.send(bytes);
  EXPECT_NE(h.client.error_of(h2::goaway), -1);
  EXPECT_FALSE(h.session().alive());
}

TEST(H2SessionTest, ACallResetInTheSameReadIsNeverDispatched) {
  harness h;
  ASSERT_TRUE(h.send(h.client.call(1, method, "x") + h2::rst(1)));
  EXPECT_TRUE(h.calls.empty());
}

TEST(H2SessionTest, MalformedRequestsAreAnsweredWithoutACall) {
  harness h;
  // The prefix says 10 bytes, 3 came.
  ASSERT_TRUE(h.send(
      h.client.headers_frame(1, h2::grpc_request_headers(method)) +
      h2::frame_bytes(h2::data, h2::end_stream, 1, std::string(1, '\0') + h2::u32(10) + "abc")));
  EXPECT_EQ(h.client.header(1, "grpc-status"), "13");
  // No message at all.
  ASSERT_TRUE(h.send(h.client.headers_frame(3, h2::grpc_request_headers(method), true)));
  EXPECT_EQ(h.client.header(3, "grpc-status"), "13");
  // Compressed.
  ASSERT_TRUE(h.send(
      h.client.headers_frame(5, h2::grpc_request_headers(method)) +
      h2::frame_bytes(h2::data, h2::end_stream, 5, std::string(1, '\1') + h2::u32(1) + "z")));
  EXPECT_EQ(h.client.header(5, "grpc-status"), "12");
  // Not gRPC: plain HTTP answers.
  auto plain = h2::grpc_request_headers(method);
  plain[4].second = "application/json";
  ASSERT_TRUE(h.send(h.client.headers_frame(7, plain) +
                     h2::frame_bytes(h2::data, h2::end_stream, 7, h2::grpc_message("x"))));
  EXPECT_EQ(h.client.header(7, ":status"), "415");
  EXPECT_TRUE(h.calls.empty());
  EXPECT_TRUE(h.session().alive());
}

TEST(H2SessionTest, ABadPrefaceEndsTheConnection) {
  h2_session s({}, [](const h2_call&) {});
  const std::string junk = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  EXPECT_FALSE(
      s.receive(reinterpret_cast<const std::uint8_t*>(junk.data()), junk.size(), harness::t0));
  std::string out;
  s.take_output(out, 1 << 20);
  EXPECT_FALSE(s.alive());
  EXPECT_FALSE(s.preface_received());
}

TEST(H2SessionTest, ShutdownSendsGoawayAndLetsOpenCallsFinish) {
  harness h({}, false);
  ASSERT_TRUE(h.send(h.client.call(1, method, "x")));
  h.session().shutdown();
  h.pump();
  EXPECT_EQ(h.client.error_of(h2::goaway), NGHTTP2_NO_ERROR);
  EXPECT_TRUE(h.session().alive());  // call 1 is open
  h.session().answer(1, status_code::ok, {}, "done");
  h.pump();
  EXPECT_EQ(h.client.header(1, "grpc-status"), "0");
  EXPECT_FALSE(h.session().alive());
}

TEST(H2SessionTest, PercentEncodesGrpcMessage) {
  EXPECT_EQ(percent_encode("plain text"), "plain text");
  EXPECT_EQ(percent_encode("50%\n\xc3\xa9"), "50%25%0A%C3%A9");
}

}  // namespace
}  // namespace sluice::daemon::grpc
