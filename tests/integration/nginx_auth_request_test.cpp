// A real nginx in front of a static location, asking sluiced through auth_request: N
// requests yield exactly the policy's capacity of 200s and the rest 429 with Retry-After.
// The server block is the one documented in docs/proxies.md, read from it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
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

// The nginx server block of docs/proxies.md, read from the doc itself so that what users
// copy is what runs here, with its listen address, root and sluiced address replaced.
std::string server_block(std::uint16_t port, const std::string& dir, std::uint16_t sluiced_port) {
  std::ifstream in(std::string(SLUICE_SOURCE_DIR) + "/docs/proxies.md");
  const std::string doc((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto open = doc.find("```nginx\nserver {");
  if (open == std::string::npos) throw std::runtime_error("docs/proxies.md: no nginx block");
  const auto body = open + std::string("```nginx\n").size();
  std::string block = doc.substr(body, doc.find("```", body) - body);
  auto replace = [&](const std::string& from, const std::string& to) {
    const auto at = block.find(from);
    if (at == std::string::npos) throw std::runtime_error("docs/proxies.md: no " + from);
    block.replace(at, from.size(), to);
  };
  replace("listen 127.0.0.1:80;", "listen 127.0.0.1:" + std::to_string(port) + ";");
  replace("root /srv/www;", "root " + dir + "/html;");
  replace("127.0.0.1:8080", "127.0.0.1:" + std::to_string(sluiced_port));
  return block;
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

TEST(NginxAuthRequestTest, ClientForwardedHeadersDoNotChooseTheRules) {
  if (nginx_path().empty()) GTEST_SKIP() << "nginx is not installed";
  // nginx is trusted, so whatever it forwards about the request is believed: a client's own
  // X-Forwarded-Uri / X-Forwarded-Method must not get through it.
  sluiced_process d(R"(deny_status: 403
trusted_proxies: [127.0.0.1/32]
policies:
  login: { capacity: 2, refill_per_second: 0.001 }
rules:
  - { name: login, match: { path_prefix: /login, methods: [GET] }, key: ip, policy: login }
)");
  nginx_server nginx([&](std::uint16_t port, const std::string& dir) {
    return server_block(port, dir, d.port());
  });
  std::ofstream(nginx.dir() + "/html/login") << "login form\n";
  const header_list spoof{{"X-Forwarded-Uri", "/elsewhere"},
                          {"X-Forwarded-Method", "OPTIONS"},
                          {"X-Original-URI", "/elsewhere"},
                          {"Forwarded", "for=198.51.100.7"},
                          {"X-Forwarded-For", "198.51.100.7"}};
  int ok = 0, limited = 0;
  for (int i = 0; i < 5; ++i) {
    const auto r = http_request(nginx.port(), "GET", "/login", "", spoof);
    if (r.status == 200) {
      ++ok;
    } else {
      EXPECT_EQ(r.status, 429);
      ++limited;
    }
  }
  EXPECT_EQ(ok, 2);
  EXPECT_EQ(limited, 3);
}

TEST(NginxAuthRequestTest, ADirectoryUrlSpendsOneToken) {
  if (nginx_path().empty()) GTEST_SKIP() << "nginx is not installed";
  sluiced_process d(sluiced_config);
  nginx_server nginx([&](std::uint16_t port, const std::string& dir) {
    return server_block(port, dir, d.port());
  });
  const auto first = http_request(nginx.port(), "GET", "/");
  EXPECT_EQ(first.status, 200);
  EXPECT_EQ(first.body, "hello\n");
  EXPECT_EQ(first.header("X-RateLimit-Remaining"), "4");
  const auto second = http_request(nginx.port(), "GET", "/index.html");
  EXPECT_EQ(second.header("X-RateLimit-Remaining"), "3");
}

TEST(NginxAuthRequestTest, NginxsOwn403StaysA403) {
  if (nginx_path().empty()) GTEST_SKIP() << "nginx is not installed";
  sluiced_process d(sluiced_config);
  // The documented block plus one location whose 403 comes from nginx itself (as a file
  // nginx may not read would give; the harness runs nginx as root, which reads anything),
  // sent to the same @denied location.
  nginx_server nginx([&](std::uint16_t port, const std::string& dir) {
    auto block = server_block(port, dir, d.port());
    block.insert(block.rfind('}'),
                 "  location = /forbidden { error_page 403 = @denied; return 403; }\n");
    return block;
  });
  const auto r = http_request(nginx.port(), "GET", "/forbidden");
  EXPECT_EQ(r.status, 403) << r.body << nginx.error_log();
  EXPECT_FALSE(r.has_header("Retry-After"));
  // sluiced's own denials still become 429s.
  for (int i = 0; i < 5; ++i) EXPECT_EQ(http_request(nginx.port(), "GET", "/").status, 200);
  const auto denied = http_request(nginx.port(), "GET", "/");
  EXPECT_EQ(denied.status, 429);
  EXPECT_EQ(denied.header("Retry-After"), "1000");
}

}  // namespace
}  // namespace sluice::test
