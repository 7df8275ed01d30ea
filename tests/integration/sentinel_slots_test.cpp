// Concurrency limits across a Sentinel failover whose new master never got the last
// acquisitions (docs/CONCURRENCY.md, "Sentinel failover and lost writes"): the lost holders
// keep working, the new master admits up to the limit again, so at most 2 x limit are in
// flight; the lost slots' renewals fail, and once their leases have ended the limit holds.
#include <gtest/gtest.h>

#include <sluice/redis_sentinel.hpp>
#include <sluice/sluice.hpp>

#include <chrono>
#include <thread>
#include <vector>

#include "support/redis_client.hpp"
#include "support/sentinel_fixture.hpp"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

TEST(SentinelSlotsTest, AFailoverThatLosesAcquisitionsAdmitsAtMostTwiceTheLimitForOneLease) {
  redis_sentinel_group group;
  redis_options o;
  o.command_timeout = 200ms;
  o.connect_timeout = 500ms;
  limiter lim(make_redis_backend(group.url(), o));
  const concurrency_policy p{.limit = 3, .lease_ttl = 3s, .on_failure = failure_mode::closed};
  ASSERT_FALSE(lim.try_acquire("warm", p).degraded());
  const auto old_port = group.master_port();

  // The replica hears nothing of these: its link is cut and cannot come back (the master
  // now wants a password the replica does not have; the limiter's connection is
  // authenticated already), and the master dies right after.
  {
    redis_client master(group.data_node(0).port());
    master.command({"CONFIG", "SET", "requirepass", "cut-the-replica-off"});
    master.command({"CLIENT", "KILL", "TYPE", "replica"});
  }
  std::vector<slot> lost;
  for (int i = 0; i < 3; ++i) lost.push_back(lim.try_acquire("tenant", p));
  for (const auto& s : lost) ASSERT_TRUE(s && !s.degraded());
  EXPECT_FALSE(lim.try_acquire("tenant", p)) << "the old master enforces the limit";
  group.data_node(0).kill();
  group.wait_for_new_master(old_port, 60s);

  // Served by the new master: it admits the limit again (the lost holders still work).
  std::vector<slot> after;
  const auto until = steady::now() + 30s;
  while (after.size() < 3 && steady::now() < until) {
    if (auto s = lim.try_acquire("tenant", p); s) {
      after.push_back(std::move(s));
    } else if (!s.degraded()) {
      break;  // a refusal by the new master
    } else {
      std::this_thread::sleep_for(50ms);  // between masters: `closed` refused
    }
  }
  const auto failed_over = steady::now();
  ASSERT_EQ(after.size(), 3u) << "the new master never had the lost acquisitions";
  EXPECT_FALSE(lim.try_acquire("tenant", p)) << "and still enforces the limit";
  EXPECT_LE(lost.size() + after.size(), 2 * p.limit);
  // The lost holders learn it at their next renewal.
  for (auto& s : lost) EXPECT_FALSE(s.renew());
  for (const auto& s : lost) EXPECT_FALSE(s);
  EXPECT_LT(steady::now() - failed_over, p.lease_ttl) << "the renewals came within one lease";
}

}  // namespace
}  // namespace sluice::test
