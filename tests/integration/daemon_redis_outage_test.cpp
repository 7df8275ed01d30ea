// sluiced under load while its Redis is killed, restarted and frozen, and in front of a
// Redis that accepts connections but never answers: no crash, no hang, every response within
// the backend timeout plus scheduling slack, the failure mode respected, recovery without a
// restart of sluiced.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "support/black_hole_server.hpp"
#include "support/daemon_http_client.hpp"
#include "support/daemon_sluiced.hpp"
#include "support/redis_server.hpp"

namespace sluice::test {
namespace {

using json = nlohmann::json;
using steady = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr int timeout_ms = 100;
// A response is late when it takes longer than the backend timeout plus this. Generous, as
// the machine running the tests may be loaded (sanitizers, two cores): the point is that
// nothing waits for a dead Redis (TCP retransmits take seconds) or hangs.
constexpr milliseconds slack{1500};
constexpr int capacity = 5;  // refill 1/s

std::string outage_config(const std::string& url, const std::string& mode) {
  return "backend: " + url + "\nbackend_timeout_ms: " + std::to_string(timeout_ms) +
         "\nbackend_connect_timeout_ms: " + std::to_string(timeout_ms) +
         "\non_backend_failure: " + mode + R"(
policies:
  api: {capacity: 5, refill_per_second: 1}
)";
}

struct tally {
  std::mutex mu;
  std::condition_variable changed;  // notified after every request counted
  int requests = 0;
  int bad_status = 0;  // anything but 200, or an I/O error
  int allowed = 0;
  int denied = 0;
  int degraded_allowed = 0;
  int degraded_denied = 0;
  milliseconds longest{0};

  int degraded() const { return degraded_allowed + degraded_denied; }
  int from_redis() const { return allowed + denied - degraded(); }  // decided by Redis
  // Waits until `ready(*this)` holds (checked under the lock), at most `within`; the phases
  // of the outage follow what the clients saw, not the clock.
  template <class Pred>
  bool wait_for(milliseconds within, Pred ready) {
    std::unique_lock lock(mu);
    return changed.wait_for(lock, within, [&] { return ready(*this); });
  }
};

// Clients POST /v1/check on one key until `stop`; each on its own keep-alive connection
// (reopened after an error, which is counted).
std::vector<std::thread> start_clients(std::uint16_t port, int n, std::atomic<bool>& stop,
                                       tally& t) {
  std::vector<std::thread> threads;
  for (int c = 0; c < n; ++c) {
    threads.emplace_back([port, &stop, &t] {
      std::unique_ptr<http_connection> conn;
      while (!stop.load()) {
        const auto start = steady::now();
        bool ok = false, allowed = false, degraded = false;
        try {
          if (!conn) conn = std::make_unique<http_connection>(port, std::chrono::seconds{30});
          auto r = conn->request("POST", "/v1/check", R"({"key":"shared","policy":"api"})",
                                 {{"Content-Type", "application/json"}});
          if (r.status == 200) {
            auto j = json::parse(r.body);
            ok = true;
            allowed = j.at("allowed").get<bool>();
            degraded = j.at("degraded").get<bool>();
          }
        } catch (const std::exception&) {
          conn.reset();
        }
        const auto took = std::chrono::duration_cast<milliseconds>(steady::now() - start);
        {
          std::lock_guard lock(t.mu);
          ++t.requests;
          t.longest = std::max(t.longest, took);
          if (!ok) {
            ++t.bad_status;
          } else {
            ++(allowed ? t.allowed : t.denied);
            if (degraded) ++(allowed ? t.degraded_allowed : t.degraded_denied);
          }
        }
        t.changed.notify_all();
      }
    });
  }
  return threads;
}

// Asks until a decision is not degraded (Redis is back and sluiced reconnected by itself).
bool recovers(std::uint16_t port, milliseconds within) {
  const auto until = steady::now() + within;
  while (steady::now() < until) {
    auto r = post_check(port, R"({"key":"probe","policy":"api"})");
    if (r.status == 200 && !json::parse(r.body).at("degraded").get<bool>()) return true;
    std::this_thread::sleep_for(milliseconds{50});
  }
  return false;
}

class DaemonRedisOutageTest : public ::testing::TestWithParam<std::string> {};

TEST_P(DaemonRedisOutageTest, KilledRestartedAndFrozenRedisUnderLoad) {
  const std::string mode = GetParam();
  redis_server redis;
  sluiced_process d(outage_config(redis.url(), mode));
  ASSERT_TRUE(recovers(d.port(), std::chrono::seconds{5}));

  tally t;
  std::atomic<bool> stop{false};
  const auto began = steady::now();
  auto clients = start_clients(d.port(), 4, stop, t);
  // Each phase lasts until the clients have seen it (several answers of its kind), within
  // a deadline that only a broken daemon reaches.
  constexpr milliseconds phase_deadline{10'000};
  auto seen = [&t](auto what) {
    std::lock_guard lock(t.mu);
    return what(t);
  };
  auto wait_for_more = [&](auto what, int more) {
    const int from = seen(what);
    return t.wait_for(phase_deadline, [&](const tally& x) { return what(x) >= from + more; });
  };
  auto redis_decided = [](const tally& x) { return x.from_redis(); };
  auto degraded = [](const tally& x) { return x.degraded(); };
  ASSERT_TRUE(wait_for_more(redis_decided, 8)) << "decisions from Redis before the outage";
  redis.kill();  // a crash: connections reset, then refused
  EXPECT_TRUE(wait_for_more(degraded, 8)) << "degraded decisions while Redis is down";
  redis.start();  // same port, empty data set
  EXPECT_TRUE(wait_for_more(redis_decided, 8)) << "decisions from Redis once it is back";
  // SIGSTOP: connections stay open, nothing answers. The freeze is the fault itself, not a
  // wait for something: it lasts longer than timeout + slack, so that a request that waited
  // for the server instead of its deadline would be seen late.
  redis.pause();
  const auto frozen = steady::now();
  EXPECT_TRUE(wait_for_more(degraded, 8)) << "degraded decisions while Redis is frozen";
  std::this_thread::sleep_until(frozen + milliseconds{timeout_ms} + slack + milliseconds{400});
  redis.resume();
  const bool back = recovers(d.port(), std::chrono::seconds{5});
  stop = true;
  for (auto& c : clients) c.join();
  const double elapsed_s = std::chrono::duration<double>(steady::now() - began).count();

  std::printf("[ mode %s ] requests %d, allowed %d, denied %d, degraded %d/%d, longest %lld ms\n",
              mode.c_str(), t.requests, t.allowed, t.denied, t.degraded_allowed, t.degraded_denied,
              static_cast<long long>(t.longest.count()));
  EXPECT_TRUE(back) << "sluiced did not return to Redis decisions by itself";
  EXPECT_EQ(t.bad_status, 0) << "every request gets a 200 decision, degraded or not";
  EXPECT_GT(t.requests, 40);
  EXPECT_LT(t.longest, milliseconds{timeout_ms} + slack);
  // The outages were seen, and each degraded decision is the mode's.
  EXPECT_GT(t.degraded_allowed + t.degraded_denied, 0);
  if (mode == "open") {
    EXPECT_EQ(t.degraded_denied, 0);
  } else if (mode == "closed") {
    EXPECT_EQ(t.degraded_allowed, 0);
  } else {
    // The local bucket: what one process alone may admit over the whole run.
    EXPECT_LE(t.degraded_allowed, capacity + static_cast<int>(elapsed_s) + 1);
  }
  // Still serving, still healthy, and it counted what happened.
  EXPECT_EQ(http_request(d.port(), "GET", "/healthz").status, 200);
  const auto metrics = http_request(d.port(), "GET", "/metrics").body;
  EXPECT_NE(metrics.find("sluice_degraded_decisions_total{mode=\"" + mode + "\""),
            std::string::npos)
      << metrics;
  EXPECT_TRUE(d.process().running());
}

INSTANTIATE_TEST_SUITE_P(Modes, DaemonRedisOutageTest, ::testing::Values("open", "closed", "local"),
                         [](const auto& info) { return info.param; });

TEST(DaemonRedisSilentTest, ARedisThatNeverAnswersCostsOneTimeoutNotAHang) {
  black_hole_server silent;
  sluiced_process d(outage_config(silent.url(), "closed"));
  int degraded_denials = 0;
  milliseconds longest{0};
  http_connection conn(d.port(), std::chrono::seconds{30});
  for (int i = 0; i < 20; ++i) {
    const auto start = steady::now();
    auto r = conn.request("POST", "/v1/check", R"({"key":"k","policy":"api"})",
                          {{"Content-Type", "application/json"}});
    longest = std::max(longest, std::chrono::duration_cast<milliseconds>(steady::now() - start));
    ASSERT_EQ(r.status, 200) << r.body;
    auto j = json::parse(r.body);
    if (!j.at("allowed").get<bool>() && j.at("degraded").get<bool>()) ++degraded_denials;
  }
  EXPECT_EQ(degraded_denials, 20);
  EXPECT_LT(longest, milliseconds{timeout_ms} + slack);
  EXPECT_EQ(http_request(d.port(), "GET", "/readyz").status, 503);
  EXPECT_GE(silent.accepted(), 1u);
  EXPECT_EQ(http_request(d.port(), "GET", "/healthz").status, 200);
}

}  // namespace
}  // namespace sluice::test
