// Two sluiced processes sharing one real Redis: concurrent checks from many clients, spread
// over both daemons, admit exactly the policy's capacity.
#include <gtest/gtest.h>

#include <atomic>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "support/daemon_http_client.hpp"
#include "support/daemon_sluiced.hpp"
#include "support/redis_client.hpp"
#include "support/redis_server.hpp"

namespace sluice::test {
namespace {

using json = nlohmann::json;

std::string shared_config(const std::string& url) {
  // closed: a backend failure could only under-admit, never make the count pass by luck.
  return "backend: " + url + R"(
threads: 3
backend_timeout_ms: 2000
on_backend_failure: closed
trusted_proxies: [127.0.0.1/32]
policies:
  api: {capacity: 25, refill_per_second: 0.001}
rules:
  - {name: api, match: {path_prefix: /api}, key: "header:X-API-Key", policy: api}
)";
}

// Clients connected to `redis`, not counting the one asking.
int connected_clients(redis_server& redis) {
  test::redis_client c(redis.port());
  const auto r = c.command({"INFO", "clients"});
  const std::string info(redis::reply_text(*r));
  const auto at = info.find("connected_clients:");
  return at == std::string::npos ? -1 : std::stoi(info.substr(at + 18)) - 1;
}

TEST(DaemonRedisTest, TwoDaemonsSharingRedisAdmitExactlyTheCapacity) {
  redis_server redis;
  // `a` has a Redis connection per server thread, so its checks of one key race over three
  // connections as well as against `b`'s one shared connection.
  sluiced_process a(shared_config(redis.url()) + "redis_connections: per_thread\n");
  sluiced_process b(shared_config(redis.url()));
  const std::uint16_t ports[2] = {a.port(), b.port()};
  // Really three connections from `a` and one from `b` (once each daemon has answered).
  for (auto port : ports) post_check(port, R"({"key":"warm","policy":"api"})");
  EXPECT_EQ(connected_clients(redis), 3 + 1);

  constexpr int clients = 16, per_client = 15;  // 240 checks for 25 tokens
  std::atomic<int> allowed{0}, denied{0}, degraded{0}, failed{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      try {
        http_connection conn(ports[c % 2]);
        for (int i = 0; i < per_client; ++i) {
          auto r = conn.request("POST", "/v1/check", R"({"key":"shared","policy":"api"})",
                                {{"Content-Type", "application/json"}});
          if (r.status != 200) {
            ++failed;
            continue;
          }
          auto j = json::parse(r.body);
          if (j["degraded"].get<bool>()) ++degraded;
          (j["allowed"].get<bool>() ? allowed : denied)++;
        }
      } catch (const std::exception&) {
        ++failed;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(degraded.load(), 0);
  EXPECT_EQ(allowed.load(), 25);
  EXPECT_EQ(denied.load(), clients * per_client - 25);

  // Both daemons decided some of them (the load really was spread).
  for (auto port : ports) {
    auto m = http_request(port, "GET", "/metrics").body;
    EXPECT_NE(
        m.find(R"(sluice_decisions_total{endpoint="check",policy="api",result="denied",rule=""})"),
        std::string::npos);
  }
  // And both see the same, spent bucket.
  for (auto port : ports) {
    auto j = json::parse(post_check(port, R"({"key":"shared","policy":"api"})").body);
    EXPECT_EQ(j["allowed"], false);
    EXPECT_EQ(j["degraded"], false);
  }
}

TEST(DaemonRedisTest, ForwardAuthThroughTwoDaemonsSharesTheBuckets) {
  redis_server redis;
  sluiced_process a(shared_config(redis.url()));
  sluiced_process b(shared_config(redis.url()));
  std::atomic<int> ok{0}, limited{0}, other{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < 8; ++c) {
    threads.emplace_back([&, c] {
      http_connection conn(c % 2 ? a.port() : b.port());
      for (int i = 0; i < 10; ++i) {
        auto r = conn.request("GET", "/v1/auth/api/items", "", {{"X-API-Key", "team-1"}});
        (r.status == 200 ? ok : r.status == 429 ? limited : other)++;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 25);
  EXPECT_EQ(limited.load(), 80 - 25);
  EXPECT_EQ(other.load(), 0);
  // Ready: the backend is reachable.
  EXPECT_EQ(http_request(a.port(), "GET", "/readyz").status, 200);
}

// Two matching rules on Redis: once the second denies, /v1/auth answers 429 and the first
// rule's bucket stays exactly as it was (all or nothing, one script for both keys).
TEST(DaemonRedisTest, ForwardAuthDenialSpendsNoRulesTokens) {
  redis_server redis;
  sluiced_process d("backend: " + redis.url() + R"(
backend_timeout_ms: 2000
on_backend_failure: closed
policies:
  big: {capacity: 10, refill_per_second: 0.001}
  tiny: {capacity: 2, refill_per_second: 0.001}
rules:
  - {name: first, match: {path_prefix: /}, key: ip, policy: big}
  - {name: second, match: {path_prefix: /x}, key: ip, policy: tiny}
)");
  redis_client c(redis.port());
  auto tokens = [&](const std::string& key) {
    const auto v = c.get("sluice:" + key);
    return v ? std::stoll(v->substr(0, v->find(' '))) / 1'000'000 : -1;
  };
  for (int i = 0; i < 2; ++i) EXPECT_EQ(http_request(d.port(), "GET", "/v1/auth/x").status, 200);
  EXPECT_EQ(tokens("first:big:ip=127.0.0.1"), 8);
  EXPECT_EQ(tokens("second:tiny:ip=127.0.0.1"), 0);
  for (int i = 0; i < 3; ++i) {
    auto r = http_request(d.port(), "GET", "/v1/auth/x");
    EXPECT_EQ(r.status, 429);
    EXPECT_EQ(r.header("X-RateLimit-Limit"), "2");  // the denying rule binds
  }
  EXPECT_EQ(tokens("first:big:ip=127.0.0.1"), 8);  // the three denials spent nothing
  // Exactly 8 more requests that only the first rule matches get through.
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(http_request(d.port(), "GET", "/v1/auth/y").status, 200) << i;
  EXPECT_EQ(http_request(d.port(), "GET", "/v1/auth/y").status, 429);
  auto m = http_request(d.port(), "GET", "/metrics").body;
  EXPECT_NE(
      m.find(
          R"(sluice_decisions_total{endpoint="auth",policy="tiny",result="denied",rule="second"} 3)"),
      std::string::npos)
      << m;
}

// A reload that switches redis_connections replaces the connections; the buckets are in
// Redis, so the limit carries on exactly across it.
TEST(DaemonRedisTest, ReloadSwitchesBetweenSharedAndPerThreadConnections) {
  redis_server redis;
  const auto base = shared_config(redis.url());
  sluiced_process d(base);
  const auto check = [&] {
    return json::parse(post_check(d.port(), R"({"key":"reload","policy":"api"})").body);
  };
  EXPECT_EQ(check()["remaining"], 24);
  EXPECT_EQ(connected_clients(redis), 1);

  d.write_config(base + "redis_connections: per_thread\n");
  ASSERT_TRUE(d.reload());
  // The old runtime's connection closes once nothing holds it any more.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds{5};
  while (connected_clients(redis) != 3 && std::chrono::steady_clock::now() < until) {
    check();
    std::this_thread::sleep_for(std::chrono::milliseconds{20});
  }
  EXPECT_EQ(connected_clients(redis), 3) << "one connection per server thread (threads: 3)";
  const auto j = check();
  EXPECT_EQ(j["degraded"], false);
  const int remaining = j["remaining"].get<int>();
  EXPECT_LT(remaining, 24);

  d.write_config(base);
  ASSERT_TRUE(d.reload());
  const auto back = check();
  EXPECT_EQ(back["degraded"], false);
  EXPECT_EQ(back["remaining"], remaining - 1) << "the same bucket in Redis, before and after";
}

// `extra`: more config lines (the connection mode).
void expect_readyz_follows_the_backend(const std::string& extra) {
  redis_server redis;
  sluiced_process d("backend: " + redis.url() + R"(
backend_timeout_ms: 200
on_backend_failure: closed
policies:
  api: {capacity: 5, refill_per_second: 1}
)" + extra);
  EXPECT_EQ(http_request(d.port(), "GET", "/readyz").status, 200);
  redis.kill();
  EXPECT_EQ(http_request(d.port(), "GET", "/readyz").status, 503);
  redis.start();
  // The backend reconnects in the background; readiness comes back.
  int status = 0;
  for (int i = 0; i < 100 && status != 200; ++i) {
    status = http_request(d.port(), "GET", "/readyz").status;
    if (status != 200) std::this_thread::sleep_for(std::chrono::milliseconds{50});
  }
  EXPECT_EQ(status, 200);
}

TEST(DaemonRedisTest, ReadyzFollowsTheBackend) { expect_readyz_follows_the_backend(""); }

// Every server thread's connection is probed; all came back.
TEST(DaemonRedisTest, ReadyzFollowsTheBackendWithAConnectionPerThread) {
  expect_readyz_follows_the_backend("threads: 3\nredis_connections: per_thread\n");
}

}  // namespace
}  // namespace sluice::test

namespace sluice::test {
namespace {

double metric_value(const std::string& text, const std::string& series) {
  const auto at = text.find("\n" + series + " ");
  return at == std::string::npos ? -1 : std::stod(text.substr(at + series.size() + 2));
}

// The backend's own counters are on /metrics: every decision went out in a script call.
TEST(DaemonRedisTest, MetricsCarryTheBackendsCounters) {
  redis_server redis;
  sluiced_process d(shared_config(redis.url()));
  for (int i = 0; i < 7; ++i) {
    ASSERT_EQ(post_check(d.port(), R"({"key":"m","policy":"api"})").status, 200);
  }
  const auto text = http_request(d.port(), "GET", "/metrics").body;
  EXPECT_EQ(metric_value(text, "sluice_redis_batched_decisions_total"), 7) << text;
  EXPECT_GE(metric_value(text, "sluice_redis_script_calls_total"), 1);
  EXPECT_LE(metric_value(text, "sluice_redis_script_calls_total"), 7);
  EXPECT_EQ(metric_value(text, "sluice_backend_connected"), 1);
  EXPECT_EQ(metric_value(text, "sluice_backend_in_flight"), 0);
  EXPECT_EQ(metric_value(text, R"(sluice_redis_cluster_redirects_total{kind="moved"})"), 0);
  EXPECT_EQ(metric_value(text, "sluice_redis_sentinel_failovers_total"), 0);
  // A second scrape adds nothing that did not happen.
  const auto again = http_request(d.port(), "GET", "/metrics").body;
  EXPECT_EQ(metric_value(again, "sluice_redis_batched_decisions_total"), 7);
}

}  // namespace
}  // namespace sluice::test
