// sluiced as a real process on a free loopback port: /v1/check decisions and headers, bad
// requests (each a 4xx problem+json, the daemon serving on), forward-auth, health, metrics,
// SIGHUP reload, SIGTERM drain, exit code 2 on an invalid config.
#include <gtest/gtest.h>

#include <signal.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "support/black_hole_server.hpp"
#include "support/daemon_http_client.hpp"
#include "support/daemon_sluiced.hpp"
#include "support/process_child.hpp"

namespace sluice::test {
namespace {

using json = nlohmann::json;

constexpr const char* check_config = R"(policies:
  api: {capacity: 3, refill_per_second: 0.001}
  big: {capacity: 100, refill_per_second: 1}
limits: {max_body_bytes: 2048, max_header_bytes: 2048}
)";

json parse(const http_reply& r) { return json::parse(r.body); }

TEST(DaemonHttpTest, CheckReturnsExactDecisionsAndHeaders) {
  sluiced_process d(check_config);
  for (int i = 0; i < 3; ++i) {
    auto r = post_check(d.port(), R"({"key":"user:42","policy":"api","cost":1})");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.header("Content-Type"), "application/json");
    auto j = parse(r);
    EXPECT_EQ(j["allowed"], true);
    EXPECT_EQ(j["limit"], 3);
    EXPECT_EQ(j["remaining"], 2 - i);
    EXPECT_EQ(j["retry_after_ms"], 0);
    EXPECT_GT(j["reset_after_ms"].get<long>(), 0);
    EXPECT_EQ(j["degraded"], false);
    EXPECT_EQ(j["policy"], "api");
    EXPECT_EQ(r.header("X-RateLimit-Limit"), "3");
    EXPECT_EQ(r.header("X-RateLimit-Remaining"), std::to_string(2 - i));
    EXPECT_TRUE(r.has_header("X-RateLimit-Reset"));
    EXPECT_EQ(r.header("RateLimit-Policy"), R"("api";q=3;w=3000)");
    EXPECT_EQ(r.header("RateLimit").rfind(R"("api";r=)" + std::to_string(2 - i) + ";t=", 0), 0u)
        << r.header("RateLimit");
    EXPECT_FALSE(r.has_header("Retry-After"));
  }
  // The fourth is denied: still 200 (the check succeeded), allowed false, exact wait.
  auto r = post_check(d.port(), R"({"key":"user:42","policy":"api"})");
  ASSERT_EQ(r.status, 200);
  auto j = parse(r);
  EXPECT_EQ(j["allowed"], false);
  EXPECT_EQ(j["remaining"], 0);
  // One token at 0.001/s takes 1000 s; a few ms have passed since the bucket was full.
  const auto retry_ms = j["retry_after_ms"].get<long>();
  EXPECT_GT(retry_ms, 990'000);
  EXPECT_LE(retry_ms, 1'000'000);
  EXPECT_EQ(r.header("Retry-After"), std::to_string((retry_ms + 999) / 1000));
  EXPECT_EQ(r.header("X-RateLimit-Remaining"), "0");
  // Another key has its own bucket; a cost spends that many tokens.
  j = parse(post_check(d.port(), R"({"key":"user:43","policy":"api","cost":3})"));
  EXPECT_EQ(j["allowed"], true);
  EXPECT_EQ(j["remaining"], 0);
}

// A sliding window in sluiced: /v1/check admits `limit` in the window and denies the next
// (200 with allowed false, the 429 of /v1/auth), and both speak of the window in their headers.
TEST(DaemonHttpTest, SlidingWindowPolicyDeniesPastItsLimit) {
  sluiced_process d(R"(deny_status: 429
policies:
  search: { algorithm: sliding_window, limit: 3, window: 1h }
rules:
  - { name: search, match: { path_prefix: /search }, key: ip, policy: search }
)");
  for (int i = 0; i < 3; ++i) {
    auto r = post_check(d.port(), R"({"key":"user:42","policy":"search"})");
    ASSERT_EQ(r.status, 200) << r.body;
    auto j = parse(r);
    EXPECT_EQ(j["allowed"], true);
    EXPECT_EQ(j["limit"], 3);
    EXPECT_EQ(j["remaining"], 2 - i);
    EXPECT_EQ(j["retry_after_ms"], 0);
    EXPECT_EQ(r.header("X-RateLimit-Limit"), "3");
    EXPECT_EQ(r.header("RateLimit-Policy"), R"("search";q=3;w=3600)");
    EXPECT_FALSE(r.has_header("Retry-After"));
  }
  auto r = post_check(d.port(), R"({"key":"user:42","policy":"search"})");
  ASSERT_EQ(r.status, 200);
  auto j = parse(r);
  EXPECT_EQ(j["allowed"], false);
  EXPECT_EQ(j["remaining"], 0);
  EXPECT_EQ(j["policy"], "search");
  const auto retry_ms = j["retry_after_ms"].get<long>();  // the first leaves after an hour
  EXPECT_GT(retry_ms, 3'590'000);
  EXPECT_LE(retry_ms, 3'600'000);
  EXPECT_EQ(r.header("Retry-After"), std::to_string((retry_ms + 999) / 1000));
  EXPECT_EQ(r.header("X-RateLimit-Remaining"), "0");
  // A cost over the window's limit is refused as such.
  r = post_check(d.port(), R"({"key":"user:43","policy":"search","cost":4})");
  EXPECT_EQ(r.status, 422);
  EXPECT_EQ(parse(r)["detail"], R"("cost" must be 1..3 (the limit) for policy "search")");

  // Forward-auth: the same window for each client IP, the IETF headers, a problem+json 429.
  for (int i = 0; i < 3; ++i) {
    auto a = http_request(d.port(), "GET", "/v1/auth/search?q=" + std::to_string(i));
    EXPECT_EQ(a.status, 200) << i;
    EXPECT_EQ(a.header("RateLimit-Policy"), R"("search";q=3;w=3600)");
    EXPECT_EQ(a.header("RateLimit").rfind(R"("search";r=)" + std::to_string(2 - i) + ";t=", 0), 0u)
        << a.header("RateLimit");
  }
  auto denied = http_request(d.port(), "GET", "/v1/auth/search?q=3");
  EXPECT_EQ(denied.status, 429);
  EXPECT_EQ(denied.header("Content-Type"), "application/problem+json");
  EXPECT_EQ(denied.header("X-RateLimit-Limit"), "3");
  EXPECT_EQ(denied.header("X-RateLimit-Remaining"), "0");
  EXPECT_EQ(denied.header("RateLimit-Policy"), R"("search";q=3;w=3600)");
  const auto retry_after = denied.header("Retry-After");
  EXPECT_TRUE(retry_after == "3600" || retry_after == "3599") << retry_after;
  EXPECT_EQ(denied.header("RateLimit"), R"("search";r=0;t=)" + retry_after);
  EXPECT_EQ(json::parse(denied.body)["status"], 429);
  EXPECT_EQ(json::parse(denied.body)["violated-policies"], json::array({"search"}));
}

struct bad_request {
  const char* name;
  std::string method;
  std::string target;
  std::string body;
  header_list headers;
  int status;
  const char* error;
};

TEST(DaemonHttpTest, BadRequestsGet4xxProblemJsonAndTheDaemonServesOn) {
  sluiced_process d(check_config);
  const header_list json_type{{"Content-Type", "application/json"}};
  const std::vector<bad_request> cases{
      {"malformed json", "POST", "/v1/check", R"({"key":"a",)", json_type, 400, "malformed_json"},
      {"not an object", "POST", "/v1/check", R"(["a"])", json_type, 400, "invalid_request"},
      {"missing key", "POST", "/v1/check", R"({"policy":"api"})", json_type, 400,
       "invalid_request"},
      {"key not a string", "POST", "/v1/check", R"({"key":7,"policy":"api"})", json_type, 400,
       "invalid_request"},
      {"missing policy", "POST", "/v1/check", R"({"key":"a"})", json_type, 400, "invalid_request"},
      {"unknown member", "POST", "/v1/check", R"({"key":"a","policy":"api","cots":1})", json_type,
       400, "invalid_request"},
      {"cost not an integer", "POST", "/v1/check", R"({"key":"a","policy":"api","cost":1.5})",
       json_type, 400, "invalid_request"},
      {"unknown policy", "POST", "/v1/check", R"({"key":"a","policy":"apx"})", json_type, 422,
       "unknown_policy"},
      {"empty key", "POST", "/v1/check", R"({"key":"","policy":"api"})", json_type, 422,
       "invalid_key"},
      {"key too long", "POST", "/v1/check",
       R"({"key":")" + std::string(901, 'k') + R"(","policy":"api"})", json_type, 422,
       "key_too_long"},
      {"cost zero", "POST", "/v1/check", R"({"key":"a","policy":"api","cost":0})", json_type, 422,
       "cost_out_of_range"},
      {"cost negative", "POST", "/v1/check", R"({"key":"a","policy":"api","cost":-1})", json_type,
       422, "cost_out_of_range"},
      {"cost over capacity", "POST", "/v1/check", R"({"key":"a","policy":"api","cost":4})",
       json_type, 422, "cost_out_of_range"},
      {"body too large", "POST", "/v1/check",
       R"({"key":")" + std::string(3000, 'k') + R"(","policy":"api"})", json_type, 413,
       "body_too_large"},
      {"headers too large",
       "POST",
       "/v1/check",
       R"({"key":"a","policy":"api"})",
       {{"Content-Type", "application/json"}, {"X-Padding", std::string(4000, 'p')}},
       431,
       "headers_too_large"},
      {"wrong method", "GET", "/v1/check", "", {}, 405, "method_not_allowed"},
      {"wrong content type",
       "POST",
       "/v1/check",
       R"({"key":"a","policy":"api"})",
       {{"Content-Type", "text/plain"}},
       415,
       "unsupported_media_type"},
      {"no content type",
       "POST",
       "/v1/check",
       R"({"key":"a","policy":"api"})",
       {},
       415,
       "unsupported_media_type"},
      {"unknown endpoint", "GET", "/v2/check", "", {}, 404, "not_found"},
      {"metrics by POST", "POST", "/metrics", "x", {}, 405, "method_not_allowed"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto r = http_request(d.port(), c.method, c.target, c.body, c.headers);
    EXPECT_EQ(r.status, c.status) << r.body;
    EXPECT_EQ(r.header("Content-Type"), "application/problem+json");
    auto j = json::parse(r.body, nullptr, false);
    ASSERT_TRUE(j.is_object()) << r.body;
    EXPECT_EQ(j["status"], c.status);
    EXPECT_EQ(j["type"], "about:blank");
    EXPECT_TRUE(j["title"].is_string());
    EXPECT_TRUE(j["detail"].is_string());
    EXPECT_EQ(j["error"], c.error);
    // Still serving, and the bad request spent nothing.
    auto ok = post_check(d.port(), R"({"key":"good","policy":"big"})");
    EXPECT_EQ(ok.status, 200);
  }
  auto j = parse(post_check(d.port(), R"({"key":"a","policy":"api"})"));
  EXPECT_EQ(j["remaining"], 2) << "a rejected request must not spend tokens";
  // A body refused before it was read still counts under the endpoint it was sent to.
  const auto metrics = http_request(d.port(), "GET", "/metrics").body;
  EXPECT_NE(metrics.find(R"(sluice_http_requests_total{code="413",endpoint="check"} 1)"),
            std::string::npos)
      << metrics;

  // A malformed request line is answered with 400 too.
  http_connection c(d.port());
  auto r = c.raw("GARBAGE\r\n\r\n");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.header("Content-Type"), "application/problem+json");
  EXPECT_EQ(post_check(d.port(), R"({"key":"good","policy":"big"})").status, 200);
}

TEST(DaemonHttpTest, ExpectContinueGetsA100ThenTheAnswer) {
  sluiced_process d(check_config);
  http_connection c(d.port());
  const std::string body = R"({"key":"ec","policy":"big"})";
  const auto interim = c.raw(
      "POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Expect: 100-continue\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n");
  EXPECT_EQ(interim.status, 100);
  const auto r = c.raw(body);
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(parse(r)["remaining"], 99);
  // Too large a body: the 413 comes at once, instead of a 100.
  http_connection c2(d.port());
  const auto big = c2.raw(
      "POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Expect: 100-continue\r\nContent-Length: 100000\r\n\r\n");
  EXPECT_EQ(big.status, 413);
}

TEST(DaemonHttpTest, KeepAliveServesManyRequestsOnOneConnection) {
  sluiced_process d(check_config);
  http_connection c(d.port());
  for (int i = 0; i < 20; ++i) {
    auto r = c.request("POST", "/v1/check", R"({"key":"ka","policy":"big"})",
                       {{"Content-Type", "application/json"}});
    ASSERT_EQ(r.status, 200);
    EXPECT_EQ(parse(r)["remaining"], 99 - i);
  }
}

// A HEAD answer on the wire: the GET answer's headers, its Content-Length included, and no
// body (the next request on the connection would read stray body bytes as its answer).
TEST(DaemonHttpTest, HeadAnswersCarryTheGetLengthAndNoBody) {
  sluiced_process d(check_config);
  http_connection c(d.port());
  for (const char* target : {"/healthz", "/metrics"}) {
    const auto get = c.request("GET", target);
    ASSERT_EQ(get.status, 200) << target;
    const auto head = c.request("HEAD", target);
    EXPECT_EQ(head.status, 200) << target;
    EXPECT_TRUE(head.body.empty()) << target;
    EXPECT_EQ(head.header("Content-Type"), get.header("Content-Type")) << target;
    if (std::string(target) == "/healthz") {
      EXPECT_EQ(head.header("Content-Length"), std::to_string(get.body.size()));
    } else {  // the metrics have moved on by a request or two
      EXPECT_GT(std::stoul(head.header("Content-Length")), 100u);
    }
  }
  const auto after = c.request("GET", "/healthz");
  EXPECT_EQ(after.status, 200);
  EXPECT_EQ(after.body, "{\"status\":\"ok\"}\n");
}

TEST(DaemonHttpTest, HealthReadinessAndMetrics) {
  sluiced_process d(check_config);
  EXPECT_EQ(http_request(d.port(), "GET", "/healthz").status, 200);
  auto ready = http_request(d.port(), "GET", "/readyz");
  EXPECT_EQ(ready.status, 200);
  EXPECT_EQ(json::parse(ready.body)["backend"], "up");
  for (int i = 0; i < 4; ++i) post_check(d.port(), R"({"key":"m","policy":"api"})");
  post_check(d.port(), R"({"key":"m","policy":"nope"})");
  auto m = http_request(d.port(), "GET", "/metrics");
  ASSERT_EQ(m.status, 200);
  EXPECT_EQ(m.header("Content-Type").rfind("text/plain; version=0.0.4", 0), 0u);
  const auto& t = m.body;
  EXPECT_NE(
      t.find(R"(sluice_decisions_total{endpoint="check",policy="api",result="allowed",rule=""} 3)"),
      std::string::npos)
      << t;
  EXPECT_NE(
      t.find(R"(sluice_decisions_total{endpoint="check",policy="api",result="denied",rule=""} 1)"),
      std::string::npos);
  EXPECT_NE(t.find(R"(sluice_http_requests_total{code="422",endpoint="check"} 1)"),
            std::string::npos);
  EXPECT_NE(t.find(R"(sluice_http_requests_total{code="200",endpoint="check"} 4)"),
            std::string::npos);
  EXPECT_NE(t.find("sluice_backend_check_duration_seconds_count 4"), std::string::npos);
  EXPECT_NE(t.find("# TYPE sluice_http_request_duration_seconds histogram"), std::string::npos);
  EXPECT_NE(t.find("sluice_backend_up 1"), std::string::npos);
}

constexpr const char* auth_config = R"(deny_status: 429
trusted_proxies: [127.0.0.1/32]
policies:
  api:   { capacity: 3, refill_per_second: 0.001 }
  login: { capacity: 2, refill_per_second: 0.001, on_backend_failure: closed }
  wide:  { capacity: 1, refill_per_second: 0.001 }
rules:
  - { name: login, match: { path_prefix: /login, methods: [POST] }, key: ip, policy: login }
  - { name: api,   match: { path_prefix: /api }, key: "header:X-API-Key", policy: api }
  - { name: default, match: { path_prefix: / }, key: ip, policy: wide, shadow: true }
)";

TEST(DaemonHttpTest, ForwardAuthFromATrustedProxyUsesItsHeaders) {
  sluiced_process d(auth_config);
  auto auth = [&](const std::string& client, const std::string& method, const std::string& uri) {
    return http_request(d.port(), "GET", "/v1/auth", "",
                        {{"X-Forwarded-For", client},
                         {"X-Forwarded-Method", method},
                         {"X-Forwarded-Uri", uri},
                         {"X-Forwarded-Host", "shop.example"}});
  };
  // login: 2 per client IP, POST only.
  for (int i = 0; i < 2; ++i) {
    auto r = auth("203.0.113.7", "POST", "/login?next=/");
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.header("X-RateLimit-Limit"), "2");
    EXPECT_EQ(r.header("X-RateLimit-Remaining"), std::to_string(1 - i));
    EXPECT_EQ(r.header("RateLimit-Policy"), R"("login";q=2;w=2000)");
  }
  auto denied = auth("203.0.113.7", "POST", "/login");
  EXPECT_EQ(denied.status, 429);
  EXPECT_EQ(denied.header("Content-Type"), "application/problem+json");
  EXPECT_EQ(denied.header("Retry-After"), "1000");
  EXPECT_EQ(denied.header("X-RateLimit-Remaining"), "0");
  EXPECT_EQ(json::parse(denied.body)["status"], 429);
  // Another client, and the same client with GET (the login rule does not match GET).
  EXPECT_EQ(auth("203.0.113.8", "POST", "/login").status, 200);
  EXPECT_EQ(auth("203.0.113.7", "GET", "/login").status, 200);
  // X-Original-* (nginx) work as well as X-Forwarded-* (Traefik).
  EXPECT_EQ(http_request(d.port(), "GET", "/v1/auth", "",
                         {{"X-Forwarded-For", "203.0.113.7"},
                          {"X-Original-Method", "POST"},
                          {"X-Original-URI", "/login"}})
                .status,
            429);
}

TEST(DaemonHttpTest, ForwardAuthKeysOnHeadersAndTheAppendedPath) {
  sluiced_process d(auth_config);
  // Envoy ext_authz style: the original method and the path appended to /v1/auth.
  for (int i = 0; i < 3; ++i) {
    auto r = http_request(d.port(), "DELETE", "/v1/auth/api/items/1", "", {{"X-API-Key", "k1"}});
    EXPECT_EQ(r.status, 200) << i;
    EXPECT_EQ(r.header("X-RateLimit-Limit"), "3");
  }
  auto r = http_request(d.port(), "GET", "/v1/auth/api/items", "", {{"X-API-Key", "k1"}});
  EXPECT_EQ(r.status, 429);
  EXPECT_TRUE(r.has_header("Retry-After"));
  EXPECT_EQ(http_request(d.port(), "GET", "/v1/auth/api/items", "", {{"X-API-Key", "k2"}}).status,
            200);
}

TEST(DaemonHttpTest, ShadowRulesCountButNeverDeny) {
  sluiced_process d(auth_config);
  // Only the shadow rule (capacity 1) matches /about: it would deny from the second on.
  for (int i = 0; i < 4; ++i) {
    auto r = http_request(d.port(), "GET", "/v1/auth/about");
    EXPECT_EQ(r.status, 200);
    EXPECT_FALSE(r.has_header("Retry-After"));
  }
  auto m = http_request(d.port(), "GET", "/metrics").body;
  EXPECT_NE(
      m.find(
          R"(sluice_decisions_total{endpoint="auth",policy="wide",result="shadow_denied",rule="default"} 3)"),
      std::string::npos)
      << m;
  EXPECT_NE(
      m.find(
          R"(sluice_decisions_total{endpoint="auth",policy="wide",result="allowed",rule="default"} 1)"),
      std::string::npos);
}

TEST(DaemonHttpTest, ForwardAuthDenialByOneRuleSpendsNoneOfTheOthers) {
  sluiced_process d(R"(policies:
  per_client: { capacity: 5, refill_per_second: 0.001 }
  per_key:    { capacity: 1, refill_per_second: 0.001 }
rules:
  - { name: client, match: { path_prefix: / }, key: ip, policy: per_client }
  - { name: key, match: { path_prefix: /api }, key: "header:X-API-Key", policy: per_key }
)");
  const header_list k1{{"X-API-Key", "k1"}};
  EXPECT_EQ(http_request(d.port(), "GET", "/v1/auth/api/x", "", k1).status, 200);
  // k1 is spent: these are denied by the key rule, and the client rule keeps its 4 tokens.
  for (int i = 0; i < 3; ++i) {
    auto r = http_request(d.port(), "GET", "/v1/auth/api/x", "", k1);
    EXPECT_EQ(r.status, 429);
    EXPECT_EQ(r.header("X-RateLimit-Limit"), "1");
  }
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(http_request(d.port(), "GET", "/v1/auth/").status, 200) << i;
  auto r = http_request(d.port(), "GET", "/v1/auth/");
  EXPECT_EQ(r.status, 429);
  EXPECT_EQ(r.header("X-RateLimit-Limit"), "5");
}

TEST(DaemonHttpTest, ForwardAuthIgnoresForwardedFactsFromAnUntrustedPeer) {
  std::string cfg = auth_config;
  cfg.replace(cfg.find("127.0.0.1/32"), 12, "10.0.0.0/8");
  sluiced_process d(cfg);
  // The peer (127.0.0.1) is not trusted: X-Forwarded-For and X-Forwarded-Uri are ignored,
  // so different claimed clients share the peer's bucket, and the path is the URL's.
  auto spoof = [&](const std::string& client) {
    return http_request(d.port(), "POST", "/v1/auth/login", "",
                        {{"X-Forwarded-For", client},
                         {"X-Forwarded-Uri", "/elsewhere"},
                         {"X-Forwarded-Method", "GET"}});
  };
  EXPECT_EQ(spoof("198.51.100.1").status, 200);
  EXPECT_EQ(spoof("198.51.100.2").status, 200);
  auto r = spoof("198.51.100.3");
  EXPECT_EQ(r.status, 429) << "a spoofed X-Forwarded-For must not buy a fresh bucket";
}

TEST(DaemonHttpTest, DenyStatusIsConfigurable) {
  std::string cfg = auth_config;
  cfg.replace(cfg.find("deny_status: 429"), 16, "deny_status: 403");
  sluiced_process d(cfg);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(http_request(d.port(), "POST", "/v1/auth/login").status, 200);
  }
  auto r = http_request(d.port(), "POST", "/v1/auth/login");
  EXPECT_EQ(r.status, 403);
  EXPECT_TRUE(r.has_header("Retry-After"));
}

TEST(DaemonHttpTest, SighupAppliesAValidConfigAndRejectsAnInvalidOne) {
  sluiced_process d(check_config);
  EXPECT_EQ(post_check(d.port(), R"({"key":"a","policy":"fresh"})").status, 422);
  EXPECT_EQ(parse(post_check(d.port(), R"({"key":"a","policy":"api"})"))["remaining"], 2);

  std::string next = check_config;
  next.insert(next.find("limits:"), "  fresh: {capacity: 7, refill_per_second: 1}\n");
  d.write_config(next);
  ASSERT_TRUE(d.reload());
  auto j = parse(post_check(d.port(), R"({"key":"a","policy":"fresh"})"));
  EXPECT_EQ(j["limit"], 7);
  // The memory backend is kept across a reload: the bucket spent before is still spent
  // (and a policy's buckets are its own: "fresh" did not spend from "api").
  EXPECT_EQ(parse(post_check(d.port(), R"({"key":"a","policy":"api"})"))["remaining"], 1);

  d.write_config("policies:\n  fresh: {capacity: 0, refill_per_second: 1}\n");
  EXPECT_FALSE(d.reload());
  EXPECT_NE(d.process().stderr_text().find(":2: policies.fresh.capacity:"), std::string::npos)
      << d.process().stderr_text();
  // The old config keeps serving.
  EXPECT_EQ(parse(post_check(d.port(), R"({"key":"a","policy":"fresh"})"))["limit"], 7);
  auto m = http_request(d.port(), "GET", "/metrics").body;
  EXPECT_NE(m.find(R"(sluice_config_reloads_total{result="success"} 1)"), std::string::npos) << m;
  EXPECT_NE(m.find(R"(sluice_config_reloads_total{result="failure"} 1)"), std::string::npos);
}

TEST(DaemonHttpTest, SigtermExitsZero) {
  sluiced_process d(check_config);
  http_connection idle(d.port());  // an idle keep-alive connection must not hold the exit up
  EXPECT_EQ(post_check(d.port(), R"({"key":"a","policy":"api"})").status, 200);
  d.process().signal(SIGTERM);
  EXPECT_EQ(d.process().wait(std::chrono::seconds{10}), 0) << d.process().stderr_text();
  EXPECT_TRUE(idle.closed_by_peer(std::chrono::seconds{1}));
}

TEST(DaemonHttpTest, SigtermDrainsARequestInFlight) {
  // A Redis that never answers keeps a check in flight for backend_timeout_ms.
  black_hole_server hole;
  sluiced_process d(
      "backend: " + hole.url() +
          "\nbackend_timeout_ms: 1500\nbackend_connect_timeout_ms: 3000\non_backend_failure: open\n"
          "policies:\n  api: {capacity: 3, refill_per_second: 1}\n",
      {"--log-level", "debug"});
  auto in_flight = std::async(
      std::launch::async, [&] { return post_check(d.port(), R"({"key":"a","policy":"api"})"); });
  // Wait until sluiced has the whole request (it logs each one at debug level).
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds{5};
  while (d.process().stderr_text().find("POST /v1/check from") == std::string::npos &&
         std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds{10});
  }
  ASSERT_EQ(in_flight.wait_for(std::chrono::seconds{0}), std::future_status::timeout)
      << "the check must still be waiting for the backend when SIGTERM arrives";
  d.process().signal(SIGTERM);
  auto r = in_flight.get();
  EXPECT_EQ(r.status, 200);
  auto j = parse(r);
  EXPECT_EQ(j["allowed"], true);
  EXPECT_EQ(j["degraded"], true);
  EXPECT_EQ(d.process().wait(std::chrono::seconds{10}), 0) << d.process().stderr_text();
}

TEST(DaemonHttpTest, ReadyzIsNotReadyWhenTheBackendIsDownAndTheModeIsClosed) {
  black_hole_server hole;
  sluiced_process closed("backend: " + hole.url() +
                         "\nbackend_timeout_ms: 100\non_backend_failure: closed\n"
                         "policies:\n  api: {capacity: 3, refill_per_second: 1}\n");
  auto r = http_request(closed.port(), "GET", "/readyz");
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(json::parse(r.body)["backend"], "unreachable");
  auto check = parse(post_check(closed.port(), R"({"key":"a","policy":"api"})"));
  EXPECT_EQ(check["allowed"], false);
  EXPECT_EQ(check["degraded"], true);
  auto m = http_request(closed.port(), "GET", "/metrics").body;
  EXPECT_NE(m.find(R"(sluice_degraded_decisions_total{mode="closed",policy="api"} 1)"),
            std::string::npos)
      << m;
  // timeout or unavailable, depending on whether the connection attempt or the command
  // ran out of time first.
  EXPECT_NE(m.find(R"(sluice_backend_errors_total{error=")"), std::string::npos);
  EXPECT_NE(m.find("sluice_backend_up 0"), std::string::npos);

  sluiced_process open("backend: " + hole.url() +
                       "\nbackend_timeout_ms: 100\non_backend_failure: open\n"
                       "policies:\n  api: {capacity: 3, refill_per_second: 1}\n");
  r = http_request(open.port(), "GET", "/readyz");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(json::parse(r.body)["backend"], "unreachable");
}

TEST(DaemonHttpTest, InvalidConfigExitsTwoNamingFileLineAndField) {
  auto dir = make_temp_dir("sluice-badconf");
  const auto path = dir + "/bad.yaml";
  {
    std::ofstream out(path);
    out << "policies:\n  api: {capacity: 10, refill_per_second: 1}\nbackend_timeout_ms: soon\n";
  }
  process_child p({sluiced_path(), "--config", path, "--listen", "127.0.0.1:0"}, "sluiced");
  EXPECT_EQ(p.wait(std::chrono::seconds{10}), 2);
  EXPECT_EQ(p.stderr_text(), path + ":3: backend_timeout_ms: must be an integer, got \"soon\"\n");
  std::filesystem::remove_all(dir);
}

TEST(DaemonHttpTest, DefaultConfigPrintsHowToTryIt) {
  sluiced_process d(std::nullopt);
  const auto out = d.process().stdout_text();
  EXPECT_NE(out.find("curl -s -X POST http://127.0.0.1:" + std::to_string(d.port()) + "/v1/check"),
            std::string::npos)
      << out;
  auto j = parse(post_check(d.port(), R"({"key":"k","policy":"default"})"));
  EXPECT_EQ(j["limit"], 10);
  EXPECT_EQ(j["remaining"], 9);
}

}  // namespace
}  // namespace sluice::test
