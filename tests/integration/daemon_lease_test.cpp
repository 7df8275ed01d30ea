// sluiced with a leased policy (lease_ttl) on a real Redis: two daemons share one key and stay
// within the stated bound, most checks are decided in-process, and /metrics says so.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "support/daemon_http_client.hpp"
#include "support/daemon_sluiced.hpp"
#include "support/redis_server.hpp"

namespace sluice::test {
namespace {

using json = nlohmann::json;

// The value of an unlabelled or labelled series in a /metrics text, -1 when absent.
double metric(const std::string& text, const std::string& series) {
  const auto at = text.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + series.size() + 2));
}

std::string leased_config(const std::string& url) {
  // A bucket that never refills within the test: what two daemons admit is its capacity,
  // plus at most rate x lease_ttl (here nothing), however the leases fall.
  return "backend: " + url + R"(
threads: 2
backend_timeout_ms: 2000
on_backend_failure: closed
policies:
  hot: {capacity: 500, refill_per_second: 0.001, lease_ttl: 200ms}
  cold: {capacity: 50, refill_per_second: 0.001, lease_ttl: 200ms}
)";
}

TEST(DaemonLeaseTest, TwoDaemonsOnOneLeasedKeyAdmitTheCapacityAndDecideMostlyInProcess) {
  redis_server redis;
  sluiced_process a(leased_config(redis.url()));
  sluiced_process b(leased_config(redis.url()));
  const std::uint16_t ports[2] = {a.port(), b.port()};
  constexpr int clients = 8, per_client = 150;  // 1,200 checks for 500 tokens
  std::atomic<int> allowed{0}, degraded{0}, failed{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      try {
        http_connection conn(ports[c % 2]);
        for (int i = 0; i < per_client; ++i) {
          auto r = conn.request("POST", "/v1/check", R"({"key":"shared","policy":"hot"})",
                                {{"Content-Type", "application/json"}});
          if (r.status != 200 && r.status != 429) {
            ++failed;
            continue;
          }
          auto j = json::parse(r.body);
          if (j["degraded"].get<bool>()) ++degraded;
          if (j["allowed"].get<bool>()) ++allowed;
        }
      } catch (const std::exception&) {
        ++failed;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(degraded.load(), 0);
  // Never more than the capacity; less only by what a lease still holds unspent, which
  // comes back when it ends.
  EXPECT_LE(allowed.load(), 500);
  EXPECT_GE(allowed.load(), 400);

  // A second leased policy, checked on one daemon only: counted apart.
  {
    http_connection conn(a.port());
    for (int i = 0; i < 20; ++i)
      ASSERT_EQ(conn.request("POST", "/v1/check", R"({"key":"other","policy":"cold"})",
                             {{"Content-Type", "application/json"}})
                    .status,
                200);
  }

  double leased = 0, granted = 0;
  for (auto port : ports) {
    const auto text = http_request(port, "GET", "/metrics").body;
    leased += metric(text, "sluice_leased_decisions_total{policy=\"hot\"}");
    granted += metric(text, "sluice_leases_total{policy=\"hot\",result=\"granted\"}");
  }
  EXPECT_GT(granted, 0);
  // Most of the 1,200 checks needed no Redis call.
  EXPECT_GT(leased, 600) << "granted " << granted;

  const auto text_a = http_request(a.port(), "GET", "/metrics").body;
  const auto text_b = http_request(b.port(), "GET", "/metrics").body;
  EXPECT_GE(metric(text_a, "sluice_leases_total{policy=\"cold\",result=\"granted\"}"), 1);
  // 20 checks: at least the first waited for its lease; the others were the lease's.
  const auto cold_local = metric(text_a, "sluice_leased_decisions_total{policy=\"cold\"}");
  EXPECT_GE(cold_local, 10);
  EXPECT_LE(cold_local, 19);
  EXPECT_EQ(metric(text_b, "sluice_leased_decisions_total{policy=\"cold\"}"), -1)
      << "b never checked the cold policy";
}

}  // namespace
}  // namespace sluice::test
