// The Sentinel backend with real redis-sentinel processes: discovery, and following a
// failover (SENTINEL FAILOVER, where the old master stays up and is demoted, and a killed
// master, which the sentinels must detect first).
#include <gtest/gtest.h>

#include <sluice/redis_sentinel.hpp>
#include <sluice/sluice.hpp>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "support/sentinel_fixture.hpp"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

policy bucket(std::uint64_t capacity, failure_mode mode) {
  policy p;
  p.capacity = capacity;
  p.refill_per_second = min_refill_per_second;
  p.on_failure = mode;
  return p;
}

redis_options options_for(const redis_sentinel_group& g) {
  redis_options o;
  o.url = g.url();
  o.command_timeout = 200ms;
  o.connect_timeout = 1000ms;
  return o;
}

TEST(SentinelBackendTest, DiscoversTheMaster) {
  redis_sentinel_group group;
  auto lim = limiter_from_url(group.url());
  const auto d = lim.check("disc", bucket(3, failure_mode::closed));
  EXPECT_TRUE(d.allowed);
  EXPECT_FALSE(d.degraded) << d.backend_error.message();
  EXPECT_EQ(d.remaining, 2u);
  redis_client master(group.data_node(0).port());
  EXPECT_TRUE(master.get("sluice:disc").has_value());
}

TEST(SentinelBackendTest, CheckAllIsAllOrNothingOnTheMaster) {
  redis_sentinel_group group;
  auto lim = limiter_from_url(group.url());
  const auto wide = bucket(5, failure_mode::closed), narrow = bucket(1, failure_mode::closed);
  const std::vector<check_item> items{{"w", wide, 1}, {"n", narrow, 1}};
  auto ds = lim.check_all(items);
  ASSERT_EQ(ds.size(), 2u);
  EXPECT_FALSE(ds[0].degraded) << ds[0].backend_error.message();
  EXPECT_TRUE(all_allowed(ds));
  ds = lim.check_all(items);
  EXPECT_TRUE(ds[0].allowed);
  EXPECT_FALSE(ds[1].allowed);
  EXPECT_EQ(ds[0].remaining, 4u);
  // The denied call left "w" as it was on the master.
  redis_client master(group.data_node(0).port());
  const auto v = master.get("sluice:w");
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(std::stoll(v->substr(0, v->find(' '))) / 1'000'000, 4);
}

// Checks in a loop on a few keys until stopped, remembering the worst latency and when the
// last degraded decision happened.
struct load {
  explicit load(std::shared_ptr<limiter> lim) : lim_(std::move(lim)) {
    for (int t = 0; t < 2; ++t) {
      threads_.emplace_back([this, t] {
        int i = t;
        while (!stop_) {
          const auto start = steady::now();
          const auto d =
              lim_->check("k" + std::to_string(i++ % 4), bucket(1'000'000'000, failure_mode::open));
          const auto end = steady::now();
          std::lock_guard lock(mu_);
          longest_ = std::max(longest_, end - start);
          all_allowed_ = all_allowed_ && d.allowed;  // open: degraded decisions allow
          if (d.degraded) {
            ++degraded_;
            last_degraded_ = end;
          } else {
            ++ok_;
          }
        }
      });
    }
  }
  ~load() { stop(); }
  void stop() {
    stop_ = true;
    for (auto& t : threads_) t.join();
    threads_.clear();
  }
  std::uint64_t ok() {
    std::lock_guard lock(mu_);
    return ok_;
  }

  std::shared_ptr<limiter> lim_;
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::uint64_t ok_ = 0, degraded_ = 0;
  bool all_allowed_ = true;
  steady::duration longest_{};
  steady::time_point last_degraded_{};
};

// After a failover, decisions are written on the new master (a fresh key lands there).
void expect_served_by(limiter& lim, std::uint16_t port, const std::string& key) {
  const auto until = steady::now() + 15s;
  for (;;) {
    const auto d = lim.check(key, bucket(10, failure_mode::closed));
    if (!d.degraded) {
      redis_client c(port);
      if (c.get("sluice:" + key)) return;
    }
    ASSERT_LT(steady::now(), until) << "not served by the new master on port " << port;
    std::this_thread::sleep_for(20ms);
  }
}

TEST(SentinelBackendTest, FollowsSentinelFailover) {
  redis_sentinel_group group;
  auto lim = std::make_shared<limiter>(make_redis_backend(group.url(), options_for(group)));
  const auto old_port = group.master_port();
  ASSERT_EQ(old_port, group.data_node(0).port());
  ASSERT_FALSE(lim->check("warm", bucket(10, failure_mode::closed)).degraded);
  load l(lim);
  std::this_thread::sleep_for(200ms);
  const auto started = steady::now();
  group.failover();
  const auto new_port = group.wait_for_new_master(old_port, 30s);
  EXPECT_EQ(new_port, group.data_node(1).port());
  expect_served_by(*lim, new_port, "after-failover");
  const auto switched = steady::now() - started;
  const auto ok_before = l.ok();
  std::this_thread::sleep_for(200ms);
  EXPECT_GT(l.ok(), ok_before);  // the load is served again too
  l.stop();
  EXPECT_TRUE(l.all_allowed_);
  EXPECT_LT(l.longest_, 1s) << "a call hung";
  // Counted once, and the counters of the old master's connection are kept.
  const auto s = lim->backend_stats();
  EXPECT_EQ(s.failovers, 1u);
  EXPECT_TRUE(s.up);
  EXPECT_GE(s.batched_decisions, l.ok());
  std::cout << "[ sentinel  ] SENTINEL FAILOVER: served by the new master "
            << std::chrono::duration_cast<std::chrono::milliseconds>(switched).count()
            << " ms after the command; " << l.degraded_ << " degraded, " << l.ok_
            << " normal decisions; longest call "
            << std::chrono::duration_cast<std::chrono::milliseconds>(l.longest_).count() << " ms\n";
}

TEST(SentinelBackendTest, FollowsAKilledMaster) {
  redis_sentinel_group group;
  auto lim = std::make_shared<limiter>(make_redis_backend(group.url(), options_for(group)));
  const auto old_port = group.master_port();
  ASSERT_FALSE(lim->check("warm", bucket(10, failure_mode::closed)).degraded);
  load l(lim);
  std::this_thread::sleep_for(200ms);
  const auto killed = steady::now();
  group.data_node(0).kill();
  const auto new_port = group.wait_for_new_master(old_port, 60s);
  expect_served_by(*lim, new_port, "after-kill");
  const auto switched = steady::now() - killed;
  l.stop();
  EXPECT_GT(l.degraded_, 0u);  // the window existed, and the failure mode decided it
  EXPECT_TRUE(l.all_allowed_);
  EXPECT_LT(l.longest_, 1s) << "a call hung";
  std::cout << "[ sentinel  ] master killed: served by the new master "
            << std::chrono::duration_cast<std::chrono::milliseconds>(switched).count()
            << " ms after the kill; " << l.degraded_ << " degraded, " << l.ok_
            << " normal decisions; longest call "
            << std::chrono::duration_cast<std::chrono::milliseconds>(l.longest_).count() << " ms\n";
}

}  // namespace
}  // namespace sluice::test
