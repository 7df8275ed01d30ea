// The admin endpoints and /v1/peek of a real sluiced, driven by a real client (curl): a key
// blocked through /v1/block with the bearer token is denied by /v1/check for as long as the
// block lasts, and /v1/reset lets it through again; the calls are logged and counted. Then
// the same on a real Redis (shared and per-thread connections: the operations block, and
// must not block a server thread), and with the backend down (503, peek degraded).
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/daemon_http_client.hpp"
#include "support/daemon_sluiced.hpp"
#include "support/loopback.hpp"
#include "support/process_child.hpp"
#include "support/redis_server.hpp"

namespace sluice::test {
namespace {

using json = nlohmann::json;

constexpr const char* token = "integration-admin-token-7f3a9c";

// The token file and curl's header file (-H @FILE keeps the token off curl's command line).
class admin_files {
 public:
  admin_files() : dir_(make_temp_dir("sluice-admin")) {
    std::ofstream(token_file()) << token << "\n";
    std::ofstream(header_file()) << "Authorization: Bearer " << token << "\n";
  }
  ~admin_files() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  std::string token_file() const { return dir_ + "/admin.token"; }
  std::string header_file() const { return dir_ + "/admin.header"; }
  std::string yaml() const { return "admin: {token_file: " + token_file() + "}\n"; }

 private:
  std::string dir_;
};

bool have_curl() { return ::access("/usr/bin/curl", X_OK) == 0; }

struct curl_reply {
  int status = 0;
  std::string headers;  ///< the response head as received
  std::string body;
};

// One `curl` run: POST `body` as JSON to `path`, with `auth_header_file` when not empty.
curl_reply curl_post(std::uint16_t port, const std::string& path, const std::string& body,
                     const std::string& auth_header_file) {
  const auto dir = make_temp_dir("sluice-curl");
  std::vector<std::string> argv{"/usr/bin/curl",
                                "-sS",
                                "-X",
                                "POST",
                                "-D",
                                dir + "/head",
                                "-o",
                                dir + "/body",
                                "-w",
                                "%{http_code}",
                                "-H",
                                "Content-Type: application/json",
                                "--data-binary",
                                body};
  if (!auth_header_file.empty()) {
    argv.push_back("-H");
    argv.push_back("@" + auth_header_file);
  }
  argv.push_back("http://127.0.0.1:" + std::to_string(port) + path);
  process_child curl(argv, "curl");
  const auto exit = curl.wait(std::chrono::seconds{20});
  curl_reply r;
  EXPECT_EQ(exit, 0) << curl.stderr_text();
  r.status = std::atoi(curl.stdout_text().c_str());
  r.headers = read_file_text(dir + "/head");
  r.body = read_file_text(dir + "/body");
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  return r;
}

std::string metrics_of(std::uint16_t port) { return http_request(port, "GET", "/metrics").body; }

TEST(DaemonAdminTest, BlockWithTheBearerTokenThenCheckIsDeniedAndResetLetsItThrough) {
  if (!have_curl()) GTEST_SKIP() << "curl is not installed (scripts/debian-packages.txt has it)";
  admin_files files;
  sluiced_process d(R"(policies:
  api: {capacity: 5, refill_per_second: 0.001}
limits: {max_body_bytes: 256}
)" + files.yaml());
  const std::string key = R"("key":"user:42","policy":"api")";
  ASSERT_EQ(json::parse(post_check(d.port(), "{" + key + "}").body)["remaining"], 4);

  // Peek is open, decides as a check would and spends nothing (remaining as it is).
  auto r = curl_post(d.port(), "/v1/peek", "{" + key + "}", "");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["allowed"], true);
  EXPECT_EQ(json::parse(r.body)["remaining"], 4);

  // No token: 401 with a Bearer challenge, and nothing blocked.
  r = curl_post(d.port(), "/v1/block", "{" + key + R"(,"duration_ms":30000})", "");
  EXPECT_EQ(r.status, 401);
  EXPECT_NE(r.headers.find("WWW-Authenticate: Bearer\r\n"), std::string::npos) << r.headers;
  EXPECT_EQ(json::parse(r.body)["error"], "unauthorized");
  EXPECT_EQ(json::parse(post_check(d.port(), "{" + key + "}").body)["allowed"], true);

  // With it: blocked for 30 s.
  r = curl_post(d.port(), "/v1/block", "{" + key + R"(,"duration_ms":30000})", files.header_file());
  ASSERT_EQ(r.status, 200) << r.body;
  auto j = json::parse(r.body);
  EXPECT_EQ(j["allowed"], false);
  EXPECT_LE(j["retry_after_ms"].get<long>(), 30'000);
  EXPECT_GT(j["retry_after_ms"].get<long>(), 25'000);
  for (int i = 0; i < 3; ++i) {
    const auto c = post_check(d.port(), "{" + key + "}");
    ASSERT_EQ(c.status, 200);
    j = json::parse(c.body);
    EXPECT_EQ(j["allowed"], false);
    EXPECT_LE(j["retry_after_ms"].get<long>(), 30'000);
    EXPECT_GT(j["retry_after_ms"].get<long>(), 25'000);
    EXPECT_EQ(c.header("Retry-After"),
              std::to_string((j["retry_after_ms"].get<long>() + 999) / 1000));
  }
  // Another key is not blocked.
  EXPECT_EQ(
      json::parse(post_check(d.port(), R"({"key":"user:43","policy":"api"})").body)["allowed"],
      true);

  // Reset: through again, as a new key.
  r = curl_post(d.port(), "/v1/reset", "{" + key + "}", files.header_file());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["allowed"], true);
  j = json::parse(post_check(d.port(), "{" + key + "}").body);
  EXPECT_EQ(j["allowed"], true);
  EXPECT_EQ(j["remaining"], 4);

  // A body over limits.max_body_bytes is refused before it is read, and still logged.
  r = curl_post(d.port(), "/v1/block", std::string(300, ' ') + "{}", files.header_file());
  EXPECT_EQ(r.status, 413);

  const auto text = metrics_of(d.port());
  for (const char* line :
       {R"(sluice_admin_requests_total{endpoint="block",outcome="ok"} 1)",
        R"(sluice_admin_requests_total{endpoint="block",outcome="unauthorized"} 1)",
        R"(sluice_admin_requests_total{endpoint="block",outcome="invalid"} 1)",
        R"(sluice_admin_requests_total{endpoint="reset",outcome="ok"} 1)",
        R"(sluice_http_requests_total{code="200",endpoint="peek"} 1)"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line << "\n" << text;
  }
  const auto log = d.process().stderr_text();
  EXPECT_NE(log.find("admin block from 127.0.0.1: ok (200); policy api, duration_ms 30000, "
                     "key user:42"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("admin block from 127.0.0.1: unauthorized (401); policy api, key user:42"),
            std::string::npos);
  EXPECT_NE(log.find("admin reset from 127.0.0.1: ok (200); policy api, key user:42"),
            std::string::npos);
  EXPECT_NE(log.find("admin block from 127.0.0.1: invalid (413); no key"), std::string::npos);
  EXPECT_EQ(log.find(token), std::string::npos) << "the token must never be logged";
}

// On Redis the operations (and peek) are blocking library calls: sluiced makes them on
// threads of their own. With a connection per server thread, a call made on the server
// thread that runs the connection could never complete.
class DaemonAdminRedisTest : public ::testing::TestWithParam<const char*> {};

TEST_P(DaemonAdminRedisTest, OperationsWorkOnEveryConnectionMode) {
  redis_server redis;
  admin_files files;
  sluiced_process d("backend: " + redis.url() + "\nredis_connections: " + GetParam() + R"(
threads: 2
backend_timeout_ms: 2000
on_backend_failure: closed
policies:
  api: {capacity: 3, refill_per_second: 0.001}
)" + files.yaml());
  const header_list auth{{"Content-Type", "application/json"},
                         {"Authorization", std::string("Bearer ") + token}};
  const std::string key = R"("key":"user:7","policy":"api")";
  // Several connections, so that calls land on both server threads.
  for (int c = 0; c < 4; ++c) {
    http_connection conn(d.port());
    auto r = conn.request("POST", "/v1/reset", "{" + key + "}", auth);
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(json::parse(r.body)["degraded"], false);
    r = conn.request("POST", "/v1/peek", "{" + key + "}", {{"Content-Type", "application/json"}});
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(json::parse(r.body)["degraded"], false);
    EXPECT_EQ(json::parse(r.body)["remaining"], 3);  // nothing spent
    r = conn.request("POST", "/v1/block", "{" + key + R"(,"duration_ms":60000})", auth);
    ASSERT_EQ(r.status, 200) << r.body;
    r = conn.request("POST", "/v1/check", "{" + key + "}", {{"Content-Type", "application/json"}});
    auto j = json::parse(r.body);
    EXPECT_EQ(j["allowed"], false);
    EXPECT_EQ(j["degraded"], false);
    EXPECT_GT(j["retry_after_ms"].get<long>(), 55'000);
    r = conn.request("POST", "/v1/penalize", "{" + key + R"(,"cost":1})", auth);
    ASSERT_EQ(r.status, 200) << r.body;
    r = conn.request("POST", "/v1/refund", "{" + key + R"(,"cost":1})", auth);
    ASSERT_EQ(r.status, 200) << r.body;
  }
}

INSTANTIATE_TEST_SUITE_P(Connections, DaemonAdminRedisTest,
                         ::testing::Values("shared", "per_thread"));

TEST(DaemonAdminOutageTest, AnOperationOnAFailedBackendIs503AndPeekIsDegraded) {
  admin_files files;
  // Nothing listens there: every call fails fast.
  const auto port = free_loopback_port();
  sluiced_process d("backend: redis://127.0.0.1:" + std::to_string(port) + R"(
backend_timeout_ms: 100
backend_connect_timeout_ms: 100
on_backend_failure: open
policies:
  api: {capacity: 3, refill_per_second: 1}
)" + files.yaml());
  const header_list auth{{"Content-Type", "application/json"},
                         {"Authorization", std::string("Bearer ") + token}};
  auto r = http_request(d.port(), "POST", "/v1/block",
                        R"({"key":"k","policy":"api","duration_ms":1000})", auth);
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_EQ(r.header("Content-Type"), "application/problem+json");
  EXPECT_EQ(json::parse(r.body)["error"], "backend_error");
  // Peek is a decision: the failure mode answers it.
  r = http_request(d.port(), "POST", "/v1/peek", R"({"key":"k","policy":"api"})",
                   {{"Content-Type", "application/json"}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["degraded"], true);
  EXPECT_EQ(json::parse(r.body)["allowed"], true);
  const auto text = metrics_of(d.port());
  EXPECT_NE(text.find(R"(sluice_admin_requests_total{endpoint="block",outcome="backend_error"} 1)"),
            std::string::npos)
      << text;
  EXPECT_NE(d.process().stderr_text().find(
                "admin block from 127.0.0.1: backend_error (503); policy api, duration_ms 1000, "
                "key k"),
            std::string::npos)
      << d.process().stderr_text();
}

}  // namespace
}  // namespace sluice::test
