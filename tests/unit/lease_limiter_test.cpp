// Quota leases through the limiter (lease_table.hpp), on a memory backend that serves them
// (memory_options::serve_leases) and a manual clock: several limiters on one key stay within
// the bound, decide mostly in-process, give back what they did not spend, and a limiter whose
// backend has no leases decides every check there, exactly.
#include <sluice/clock.hpp>
#include <sluice/limiter.hpp>
#include <sluice/memory_backend.hpp>

#include <chrono>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

namespace sluice {
namespace {

using namespace std::chrono_literals;

struct fleet {
  explicit fleet(int n, bool serve = true) {
    memory_options o;
    o.time_source = clock;
    o.serve_leases = serve;
    shared = make_memory_backend(o);
    for (int i = 0; i < n; ++i) limiters.emplace_back(shared, nullptr, clock);
  }
  void advance(std::chrono::microseconds d) { clock->set(clock->now() + d); }

  std::shared_ptr<manual_clock> clock =
      std::make_shared<manual_clock>(std::chrono::microseconds{0});
  std::shared_ptr<backend> shared;
  std::vector<limiter> limiters;
};

policy leased_bucket(std::uint64_t capacity, double rate, std::chrono::milliseconds ttl) {
  policy p;
  p.capacity = capacity;
  p.refill_per_second = rate;
  p.lease_ttl = ttl;
  return p;
}

TEST(LeaseLimiterTest, ThreeInstancesOnOneKeyStayWithinTheBoundAndDecideLocally) {
  fleet f(3);
  const auto p = leased_bucket(5000, 5000, 20ms);
  std::uint64_t allowed = 0, checks = 0;
  // 3 s of demand at 12 checks per 0.5 ms (24,000/s, about five times the rate), spread over
  // the three.
  for (int step = 0; step < 6000; ++step) {
    for (auto& l : f.limiters) {
      for (int i = 0; i < 4; ++i) {
        allowed += l.check("hot", p).allowed ? 1 : 0;
        ++checks;
      }
    }
    f.advance(500us);
  }
  // The bucket allows its capacity and 3 s of refill; leases add at most rate x ttl.
  const double allowance = 5000 + 5000 * 3.0;
  EXPECT_LE(static_cast<double>(allowed), allowance + 5000 * 0.020);
  EXPECT_GE(static_cast<double>(allowed), 0.95 * allowance);
  std::uint64_t leased = 0, leases = 0;
  for (auto& l : f.limiters) {
    const auto s = l.stats();
    leased += s.leased_decisions;
    leases += s.leases + s.lease_denials;
    // Each instance is served, about equally (a third would be 6,667 each).
    EXPECT_GT(s.allowed, allowance / 5);
  }
  EXPECT_GT(leased, checks * 9 / 10);
  EXPECT_LT(leases, checks / 20);
}

TEST(LeaseLimiterTest, WhatALeaseDidNotSpendGoesBackWhenItEnds) {
  fleet f(2);
  // No refill within the test: only what comes back can be spent again.
  const auto p = leased_bucket(100, 0.001, 50ms);
  auto& a = f.limiters[0];
  auto& b = f.limiters[1];
  // `a` grows its demand, and so its leases, then stops asking.
  int by_a = 0;
  for (int i = 0; i < 60; ++i) {
    by_a += a.check("k", p).allowed ? 1 : 0;
    f.advance(1ms);
  }
  EXPECT_EQ(by_a, 60);
  f.advance(60ms);  // every lease of `a` has ended
  // The limiter's next check of any leased key gives back what ended unspent.
  a.check("other", p);
  const auto sa = a.stats();
  EXPECT_GT(sa.lease_units_expired, 0u);
  EXPECT_EQ(sa.lease_units_returned, sa.lease_units_expired);
  // `b` can have every unit `a` did not spend: 100 in all, never more.
  int by_b = 0;
  for (int i = 0; i < 200; ++i) {
    by_b += b.check("k", p).allowed ? 1 : 0;
    f.advance(1ms);
  }
  EXPECT_EQ(by_a + by_b, 100) << "returned " << sa.lease_units_returned;
}

TEST(LeaseLimiterTest, CountsLeasesPerPolicy) {
  fleet f(1);
  auto& l = f.limiters[0];
  const auto hot = leased_bucket(1000, 0.001, 50ms);
  const auto cold = leased_bucket(10, 0.001, 50ms);
  auto same_as_hot = hot;  // leases alike: counted with hot
  same_as_hot.on_failure = failure_mode::closed;
  for (int i = 0; i < 100; ++i) {
    l.check(i % 2 ? "a" : "b", i % 4 == 3 ? same_as_hot : hot);
    f.advance(100us);
  }
  int cold_allowed = 0;
  for (int i = 0; i < 20; ++i) cold_allowed += l.check("c", cold).allowed ? 1 : 0;
  EXPECT_EQ(cold_allowed, 10);
  const auto by = l.lease_stats_by_policy();
  ASSERT_EQ(by.size(), 2u);
  EXPECT_EQ(by[0].first.capacity, 1000u);
  EXPECT_EQ(by[1].first.capacity, 10u);
  const auto& h = by[0].second;
  const auto& c = by[1].second;
  EXPECT_GE(h.leases, 2u);  // one per key at least
  EXPECT_GT(h.leased_decisions, 80u);
  EXPECT_LE(h.leased_decisions, 98u);  // each key's first check waited for its lease
  EXPECT_EQ(c.leased_units, 10u);
  // The limiter's totals are the sum.
  const auto s = l.stats();
  EXPECT_EQ(s.leases, h.leases + c.leases);
  EXPECT_EQ(s.leased_units, h.leased_units + c.leased_units);
  EXPECT_EQ(s.leased_decisions, h.leased_decisions + c.leased_decisions);
  EXPECT_EQ(s.lease_denials, h.lease_denials + c.lease_denials);
}

TEST(LeaseLimiterTest, FixedWindowsStayExactAcrossInstances) {
  fleet f(4);
  policy p;
  p.algorithm = algorithm::fixed_window;
  p.limit = 500;
  p.window = 100ms;
  p.lease_ttl = 30ms;
  std::vector<std::uint64_t> per_window(20, 0);
  for (int ms = 0; ms < 2000; ++ms) {
    for (auto& l : f.limiters) {
      for (int i = 0; i < 3; ++i)
        per_window[static_cast<std::size_t>(ms / 100)] += l.check("w", p).allowed;
    }
    f.advance(1ms);
  }
  for (std::size_t w = 0; w < per_window.size(); ++w) {
    EXPECT_LE(per_window[w], 500u) << "window " << w;
    EXPECT_GE(per_window[w], 450u) << "window " << w;
  }
}

TEST(LeaseLimiterTest, ABackendWithoutLeasesDecidesEveryCheckExactly) {
  fleet f(2, /*serve=*/false);
  const auto p = leased_bucket(10, 0.001, 100ms);
  int allowed = 0;
  for (int i = 0; i < 20; ++i) {
    for (auto& l : f.limiters) allowed += l.check("k", p).allowed ? 1 : 0;
  }
  EXPECT_EQ(allowed, 10);
  for (auto& l : f.limiters) {
    EXPECT_EQ(l.stats().leases, 0u);
    EXPECT_EQ(l.stats().leased_decisions, 0u);
  }
}

TEST(LeaseLimiterTest, AKeyOperationReachesTheLeasingInstanceAtOnce) {
  fleet f(1);
  const auto p = leased_bucket(10, 0.001, 1000ms);
  auto& l = f.limiters[0];
  int allowed = 0;
  for (int i = 0; i < 15; ++i) allowed += l.check("k", p).allowed ? 1 : 0;
  EXPECT_EQ(allowed, 10);
  std::error_code ec;
  l.block("k", p, 500ms, ec);
  ASSERT_FALSE(ec);
  f.advance(1ms);
  // Blocked: nothing held here may admit it.
  EXPECT_FALSE(l.check("k", p).allowed);
  l.reset("k", p, ec);
  ASSERT_FALSE(ec);
  EXPECT_TRUE(l.check("k", p).allowed);
}

}  // namespace
}  // namespace sluice
