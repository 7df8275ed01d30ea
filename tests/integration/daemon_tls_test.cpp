// sluiced with a rediss:// backend: it decides over TLS, and a TLS file it cannot load is
// an invalid config (exit 2, the file named) found when the backend starts.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "support/daemon_http_client.hpp"
#include "support/daemon_sluiced.hpp"
#include "support/process_child.hpp"
#include "support/redis_server.hpp"
#include "support/test_pki.hpp"

namespace sluice::test {
namespace {

using json = nlohmann::json;

TEST(DaemonTlsTest, DecidesOverTls) {
  test_pki pki;
  redis_tls_files files;
  files.cert = pki.server_cert();
  files.key = pki.server_key();
  files.ca = pki.ca();
  redis_server redis(files);
  sluiced_process d("backend: \"" + redis.url() + "?ca=" + pki.ca() +
                    "\"\nbackend_timeout_ms: 500\nbackend_connect_timeout_ms: 1000\n"
                    "on_backend_failure: closed\n"
                    "policies:\n  api: {capacity: 3, refill_per_second: 0.001}\n");
  json last;
  for (int i = 0; i < 50; ++i) {  // the first checks may meet the connection coming up
    last = json::parse(post_check(d.port(), R"({"key":"k","policy":"api"})").body);
    if (last["degraded"] == false) break;
  }
  EXPECT_EQ(last["degraded"], false) << last.dump();
  EXPECT_EQ(last["allowed"], true);
  const auto next = json::parse(post_check(d.port(), R"({"key":"k","policy":"api"})").body);
  EXPECT_EQ(next["degraded"], false);
  EXPECT_EQ(next["remaining"], last["remaining"].get<int>() - 1);
}

TEST(DaemonTlsTest, UnloadableCaFileExitsTwoNamingIt) {
  const auto dir = make_temp_dir("sluice-tlsconf");
  const auto path = dir + "/tls.yaml";
  const auto missing = dir + "/no-such-ca.pem";
  {
    std::ofstream out(path);
    out << "backend: \"rediss://127.0.0.1:6390?ca=" << missing << "\"\n"
        << "policies:\n  api: {capacity: 3, refill_per_second: 1}\n";
  }
  process_child p({sluiced_path(), "--config", path, "--listen", "127.0.0.1:0"}, "sluiced");
  EXPECT_EQ(p.wait(std::chrono::seconds{10}), 2);
  const auto err = p.stderr_text() + p.stdout_text();
  EXPECT_NE(err.find(missing), std::string::npos) << err;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace sluice::test
