// Quota leases through Redis Sentinel (docs/LEASES.md): leases come from the master the
// sentinels name, two limiters on one key stay within the stated bound, and a failover
// costs what the leases held then and the failure mode until the new master leases again.
#include <gtest/gtest.h>

#include <sluice/redis_sentinel.hpp>
#include <sluice/sluice.hpp>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "support/sentinel_fixture.hpp"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

redis_options quick() {
  redis_options o;
  o.command_timeout = 300ms;
  o.connect_timeout = 500ms;
  return o;
}

TEST(SentinelLeaseTest, TwoLimitersStayWithinTheBoundAndLeaseAgainAfterAFailover) {
  redis_sentinel_group group;
  policy p;
  p.capacity = 2000;
  p.refill_per_second = 1000;  // a refill horizon of 2 s, leased for 1 % of it
  p.lease_ttl = 20ms;
  p.on_failure = failure_mode::closed;
  std::vector<limiter> lims;
  for (int i = 0; i < 2; ++i) lims.emplace_back(make_redis_backend(group.url(), quick()));

  // Demand far above the limit for 1 s, from two limiters as from two instances.
  std::atomic<std::uint64_t> allowed{0}, checks{0};
  const auto start = steady::now();
  std::vector<std::thread> threads;
  for (auto& l : lims) {
    threads.emplace_back([&, &lim = l] {
      while (steady::now() - start < 1s) {
        const auto d = lim.check("tenant", p);
        checks.fetch_add(1);
        if (d.allowed && !d.degraded) allowed.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  const double secs = std::chrono::duration<double>(steady::now() - start).count();
  const double allowance = static_cast<double>(p.capacity) + p.refill_per_second * secs;
  const double bound = allowance + p.refill_per_second * 0.020;  // + rate x lease_ttl
  EXPECT_LE(static_cast<double>(allowed.load()), bound);
  EXPECT_GE(static_cast<double>(allowed.load()), 0.95 * allowance);
  std::uint64_t leased = 0, leases = 0;
  for (const auto& l : lims) {
    leased += l.stats().leased_decisions;
    leases += l.stats().leases;
  }
  EXPECT_GT(leases, 0u) << "leases come from the master the sentinels name";
  EXPECT_GT(leased, checks.load() / 2) << "most checks decided in-process";

  // The master dies: what a limiter holds decides until its lease ends (20 ms), then
  // `closed` refuses, marked degraded, until the new master leases again.
  auto& lim = lims.front();
  const auto old_port = group.master_port();
  group.data_node(0).kill();
  const auto killed = steady::now();
  bool saw_degraded = false;
  while (steady::now() - killed < 2s && !saw_degraded) {
    const auto d = lim.check("after", p);
    if (d.degraded) {
      saw_degraded = true;
      EXPECT_FALSE(d.allowed) << "closed";
    }
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_TRUE(saw_degraded) << "no lease outlives its lease_ttl without its master";
  group.wait_for_new_master(old_port, 60s);
  const auto leases_before = lim.stats().leases;
  bool served = false;
  const auto until = steady::now() + 30s;
  while (!served && steady::now() < until) {
    const auto d = lim.check("after", p);
    served = d.allowed && !d.degraded;
    if (!served) std::this_thread::sleep_for(50ms);
  }
  ASSERT_TRUE(served) << "the new master serves the key";
  EXPECT_GT(lim.stats().leases, leases_before) << "by leasing again";
}

}  // namespace
}  // namespace sluice::test
