// The header-only Boost.Beast adapter: request facts and denials, without sockets.
#include <gtest/gtest.h>

#include <boost/asio/ip/address.hpp>
#include <nlohmann/json.hpp>

#include <sluice/http/beast.hpp>
#include <sluice/http/client_ip.hpp>

namespace sluice::http {
namespace {

namespace bhttp = boost::beast::http;

TEST(HttpBeastAdapterTest, RequestFacts) {
  bhttp::request<bhttp::string_body> req{bhttp::verb::post, "/api/items?page=2", 11};
  req.set(bhttp::field::host, "api.example.com");
  req.insert("X-Forwarded-For", "198.51.100.1, 203.0.113.9");
  req.insert("x-forwarded-for", "10.0.0.2");
  req.set("X-API-Key", "k1");
  const auto f = beast::make_request_facts(req, boost::asio::ip::make_address("10.0.0.1"));
  EXPECT_EQ(f.peer, "10.0.0.1");
  EXPECT_EQ(f.method, "POST");
  EXPECT_EQ(f.path, "/api/items");
  EXPECT_EQ(f.host, "api.example.com");
  ASSERT_TRUE(f.headers);
  EXPECT_EQ(f.headers("x-api-key"), "k1");
  EXPECT_EQ(f.headers("X-Forwarded-For"), "198.51.100.1, 203.0.113.9, 10.0.0.2");
  EXPECT_EQ(f.headers("Forwarded"), std::nullopt);

  key_options o;
  o.trusted_proxies = {*parse_cidr("10.0.0.0/8")};
  EXPECT_EQ(derive_client(f, o).key, "203.0.113.9");

  const auto v6 = beast::make_request_facts(req, boost::asio::ip::make_address("::ffff:10.0.0.1"));
  EXPECT_EQ(derive_client(v6, o).key, "203.0.113.9");  // an IPv4-mapped peer is trusted
}

TEST(HttpBeastAdapterTest, DenialAndHeaders) {
  bhttp::request<bhttp::string_body> req{bhttp::verb::get, "/", 11};
  req.keep_alive(true);
  rate_limit_response r;
  r.allowed = false;
  r.status = 429;
  r.headers = {{"Retry-After", "3"}, {"X-RateLimit-Remaining", "0"}};
  r.body = R"({"type":"about:blank","title":"x","status":429})";
  const auto res = beast::make_denial(req, r);
  EXPECT_EQ(res.result(), bhttp::status::too_many_requests);
  EXPECT_EQ(res[bhttp::field::retry_after], "3");
  EXPECT_EQ(res["X-RateLimit-Remaining"], "0");
  EXPECT_EQ(res[bhttp::field::content_type], "application/problem+json");
  EXPECT_EQ(res[bhttp::field::content_length], std::to_string(r.body.size()));
  EXPECT_TRUE(res.keep_alive());
  EXPECT_EQ(nlohmann::json::parse(res.body())["status"], 429);

  bhttp::response<bhttp::string_body> ok{bhttp::status::ok, 11};
  ok.set("X-RateLimit-Remaining", "old");
  beast::set_headers(ok, {{"X-RateLimit-Remaining", "4"}, {"RateLimit", "\"api\";r=4;t=1"}});
  EXPECT_EQ(ok["X-RateLimit-Remaining"], "4");
  EXPECT_EQ(ok["RateLimit"], "\"api\";r=4;t=1");
}

}  // namespace
}  // namespace sluice::http
