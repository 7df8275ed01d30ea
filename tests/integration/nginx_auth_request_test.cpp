// A real nginx in front of a static location, asking sluiced through auth_request: N
// requests yield exactly the policy's capacity of 200s and the rest 429 with Retry-After.
// The server block below is the config documented in docs/proxies.md.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "support/daemon_http_client.hpp"
#include "support/daemon_sluiced.hpp"
#include "support/nginx_server.hpp"

namespace sluice::test {
namespace {

// nginx's auth_request passes only 401/403 from the subrequest (anything else but 2xx is
// a 500), so sluiced answers denials with 403 and nginx turns them into 429.
constexpr const char* sluiced_config = R"(deny_status: 403
trusted_proxies: [127.0.0.1/32]
policies:
  site: { capacity: 5, refill_per_second: 0.001 }
rules:
  - { name: site, match: { path_prefix: / }, key: ip, policy: site }
)";

std::string server_block(std::uint16_t port, const std::string& dir, std::uint16_t sluiced_port) {
  const auto sluiced = "127.0.0.1:" + std::to_string(sluiced_port);
  return R"(
  server {
    listen 127.0.0.1:)" +
         std::to_string(port) + R"(;
    root )" +
         dir + R"(/html;

    location / {
      auth_request /_sluice;
      # Copy the decision's headers from the auth response onto the client's response.
      auth_request_set $ratelimit_limit     $upstream_http_x_ratelimit_limit;
      auth_request_set $ratelimit_remaining $upstream_http_x_ratelimit_remaining;
      auth_request_set $ratelimit_reset     $upstream_http_x_ratelimit_reset;
      auth_request_set $retry_after         $upstream_http_retry_after;
      add_header X-RateLimit-Limit     $ratelimit_limit always;
      add_header X-RateLimit-Remaining $ratelimit_remaining always;
      add_header X-RateLimit-Reset     $ratelimit_reset always;
      # sluiced denies with 403 (deny_status: 403); the client sees 429.
      error_page 403 = @ratelimited;
      # No try_files/index fallback here: an internal redirect runs auth_request again and
      # would spend a second token for the same client request.
    }

    location = /_sluice {
      internal;
      proxy_pass http://)" +
         sluiced + R"(/v1/auth;
      proxy_pass_request_body off;
      proxy_set_header Content-Length "";
      proxy_set_header X-Original-Method $request_method;
      proxy_set_header X-Original-URI    $request_uri;
      proxy_set_header X-Forwarded-Host  $host;
      # nginx is the edge: the client is the peer it sees (clients cannot spoof it).
      proxy_set_header X-Forwarded-For   $remote_addr;
    }

    location @ratelimited {
      add_header Retry-After           $retry_after always;
      add_header X-RateLimit-Limit     $ratelimit_limit always;
      add_header X-RateLimit-Remaining $ratelimit_remaining always;
      add_header X-RateLimit-Reset     $ratelimit_reset always;
      return 429 '{"type":"about:blank","title":"Too Many Requests","status":429}';
    }
  }
)";
}

TEST(NginxAuthRequestTest, AdmitsExactlyTheCapacityThenAnswers429WithRetryAfter) {
  if (nginx_path().empty()) GTEST_SKIP() << "nginx is not installed";
  sluiced_process d(sluiced_config);
  nginx_server nginx([&](std::uint16_t port, const std::string& dir) {
    return server_block(port, dir, d.port());
  });

  constexpr int n = 12;
  int ok = 0, limited = 0;
  for (int i = 0; i < n; ++i) {
    SCOPED_TRACE(i);
    auto r = http_request(nginx.port(), "GET", "/index.html");
    EXPECT_EQ(r.header("X-RateLimit-Limit"), "5");
    if (r.status == 200) {
      ++ok;
      EXPECT_EQ(r.body, "hello\n");
      EXPECT_EQ(r.header("X-RateLimit-Remaining"), std::to_string(5 - ok));
      EXPECT_FALSE(r.has_header("Retry-After"));
    } else {
      ++limited;
      EXPECT_EQ(r.status, 429) << r.body << nginx.error_log();
      // One token at 0.001/s: 1000 s, rounded up to whole seconds.
      EXPECT_EQ(r.header("Retry-After"), "1000");
      EXPECT_EQ(r.header("X-RateLimit-Remaining"), "0");
    }
  }
  EXPECT_EQ(ok, 5);
  EXPECT_EQ(limited, n - 5);
  // The 200s came first: the bucket was never refilled in between.
  auto m = http_request(d.port(), "GET", "/metrics").body;
  EXPECT_NE(
      m.find(
          R"(sluice_decisions_total{endpoint="auth",policy="site",result="allowed",rule="site"} 5)"),
      std::string::npos)
      << m;
  EXPECT_NE(
      m.find(
          R"(sluice_decisions_total{endpoint="auth",policy="site",result="denied",rule="site"} 7)"),
      std::string::npos);
}

TEST(NginxAuthRequestTest, TheOriginalUriReachesTheRules) {
  if (nginx_path().empty()) GTEST_SKIP() << "nginx is not installed";
  // Only /login is limited (capacity 1); / stays open.
  sluiced_process d(R"(deny_status: 403
trusted_proxies: [127.0.0.1/32]
policies:
  login: { capacity: 1, refill_per_second: 0.001 }
rules:
  - { name: login, match: { path_prefix: /login, methods: [GET] }, key: ip, policy: login }
)");
  nginx_server nginx([&](std::uint16_t port, const std::string& dir) {
    return server_block(port, dir, d.port());
  });
  std::ofstream(nginx.dir() + "/html/login") << "login form\n";
  auto first = http_request(nginx.port(), "GET", "/login?user=a");
  EXPECT_EQ(first.status, 200);
  EXPECT_EQ(first.body, "login form\n");
  EXPECT_EQ(http_request(nginx.port(), "GET", "/login").status, 429);
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(http_request(nginx.port(), "GET", "/index.html").status, 200);
}

}  // namespace
}  // namespace sluice::test
