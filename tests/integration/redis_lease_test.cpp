// Quota leases (policy::lease_ttl) against a real redis-server and a real Redis Cluster:
// several processes on one key stay within the stated bound, a lease holder killed with
// SIGKILL only under-admits, Redis killed mid-run lets the leases run out and then the failure
// mode decides, and the key operations and check_all still do what they say with leases.
#include <sluice/error.hpp>
#include <sluice/limiter.hpp>
#include <sluice/redis_backend.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "support/cluster_fixture.hpp"
#include "support/redis_server.hpp"

namespace {

using namespace sluice;
using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

redis_options generous() {
  redis_options o;
  o.command_timeout = 1000ms;
  o.connect_timeout = 2000ms;
  return o;
}

// A token bucket whose refill horizon (capacity / rate) is 2 s, leased for 1 % of it.
policy leased_bucket() {
  policy p;
  p.capacity = 2000;
  p.refill_per_second = 1000;
  p.lease_ttl = 20ms;
  p.on_failure = failure_mode::closed;
  return p;
}

// What one worker saw: checks allowed, and when it started and stopped checking (steady
// clock, which every process on the machine shares).
struct tally {
  std::uint64_t allowed = 0;
  std::uint64_t checks = 0;
  std::int64_t first_us = 0;
  std::int64_t last_us = 0;
};

std::int64_t steady_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(steady::now().time_since_epoch())
      .count();
}

// Checks `key` as fast as one thread can for `run`, on a limiter of its own.
tally hammer(const std::string& url, const std::string& key, const policy& p,
             std::chrono::milliseconds run) {
  auto lim = limiter(make_redis_backend(url, generous()));
  tally t;
  t.first_us = steady_us();
  const auto end = steady::now() + run;
  while (steady::now() < end) {
    for (int i = 0; i < 64; ++i) {
      const auto d = lim.check(key, p);
      ++t.checks;
      if (d.allowed && !d.degraded) ++t.allowed;
    }
  }
  t.last_us = steady_us();
  return t;
}

// Forks `n` processes that each hammer `key` for `run`; `kill_one_after` > 0 kills the
// first with SIGKILL then (its count is lost, as a crashed instance's is). Returns the
// tallies of those that finished.
std::vector<tally> in_processes(int n, const std::string& url, const std::string& key,
                                const policy& p, std::chrono::milliseconds run,
                                std::chrono::milliseconds kill_one_after = 0ms) {
  std::vector<std::pair<pid_t, int>> kids;
  for (int i = 0; i < n; ++i) {
    int fds[2];
    if (pipe(fds) != 0) ADD_FAILURE() << "pipe";
    const pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      const auto t = hammer(url, key, p, run);
      // The limiter is gone: what its leases held went back before this write.
      const auto written = write(fds[1], &t, sizeof t);
      _exit(written == sizeof t ? 0 : 1);
    }
    close(fds[1]);
    kids.emplace_back(pid, fds[0]);
  }
  if (kill_one_after > 0ms) {
    std::this_thread::sleep_for(kill_one_after);  // the point in the run to crash at
    kill(kids.front().first, SIGKILL);
  }
  std::vector<tally> out;
  for (auto& [pid, fd] : kids) {
    tally t;
    const bool got = read(fd, &t, sizeof t) == sizeof t;
    close(fd);
    int status = 0;
    waitpid(pid, &status, 0);
    if (got) out.push_back(t);
  }
  return out;
}

// What a token bucket allows from full over `us`: its capacity and its refill.
double allowance(const policy& p, std::int64_t us) {
  return static_cast<double>(p.capacity) + p.refill_per_second * static_cast<double>(us) / 1e6;
}

struct span_of {
  std::uint64_t allowed = 0;
  std::int64_t us = 0;
};
span_of total(const std::vector<tally>& ts) {
  span_of s;
  std::int64_t first = INT64_MAX, last = 0;
  for (const auto& t : ts) {
    s.allowed += t.allowed;
    first = std::min(first, t.first_us);
    last = std::max(last, t.last_us);
  }
  s.us = last - first;
  return s;
}

// The bound docs/LEASES.md states for a token bucket: what it allows over the run, plus
// rate x lease_ttl.
double bound(const policy& p, std::int64_t us) {
  return allowance(p, us) +
         p.refill_per_second * std::chrono::duration<double>(p.lease_ttl).count();
}

TEST(RedisLeaseTest, FourProcessesOnOneKeyStayWithinTheBound) {
  test::redis_server redis;
  const auto p = leased_bucket();
  const auto ts = in_processes(4, redis.url(), "hot", p, 2500ms);
  ASSERT_EQ(ts.size(), 4u);
  const auto s = total(ts);
  const double allowed = static_cast<double>(s.allowed);
  std::printf("allowed %llu over %.3f s; the bucket allows %.0f, the bound %.0f\n",
              static_cast<unsigned long long>(s.allowed), static_cast<double>(s.us) / 1e6,
              allowance(p, s.us), bound(p, s.us));
  EXPECT_LE(allowed, 1.01 * allowance(p, s.us));
  EXPECT_LE(allowed, bound(p, s.us));
  EXPECT_GE(allowed, 0.95 * allowance(p, s.us));
  // Demand was far above the limit, and each process was served.
  std::uint64_t checks = 0;
  for (const auto& t : ts) {
    checks += t.checks;
    EXPECT_GT(t.allowed, 0u);
  }
  EXPECT_GT(checks, 4 * s.allowed);
}

TEST(RedisLeaseTest, FourProcessesOnOneKeyOfTheClusterStayWithinTheBound) {
  test::redis_cluster cluster;
  const auto p = leased_bucket();
  const auto ts = in_processes(4, cluster.url(), "hot{cluster}", p, 2500ms);
  ASSERT_EQ(ts.size(), 4u);
  const auto s = total(ts);
  const double allowed = static_cast<double>(s.allowed);
  std::printf("cluster: allowed %llu over %.3f s; the bucket allows %.0f\n",
              static_cast<unsigned long long>(s.allowed), static_cast<double>(s.us) / 1e6,
              allowance(p, s.us));
  EXPECT_LE(allowed, bound(p, s.us));
  EXPECT_GE(allowed, 0.95 * allowance(p, s.us));
}

TEST(RedisLeaseTest, AHolderKilledWithSigkillOnlyUnderAdmits) {
  test::redis_server redis;
  const auto p = leased_bucket();
  const auto ts = in_processes(4, redis.url(), "hot", p, 2000ms, 700ms);
  ASSERT_EQ(ts.size(), 3u);
  const auto s = total(ts);
  // The killed process's leases were debited and never given back: the survivors get less,
  // never more.
  EXPECT_LE(static_cast<double>(s.allowed), bound(p, s.us));
  // And they are still served (a loose floor: under ASan on 2 cores, 3 processes checking
  // as fast as they can got 0.45x).
  EXPECT_GT(static_cast<double>(s.allowed), 0.25 * allowance(p, s.us));
  for (const auto& t : ts) EXPECT_GT(t.allowed, 0u);
}

TEST(RedisLeaseTest, OneProcessDecidesMostChecksLocally) {
  test::redis_server redis;
  auto p = leased_bucket();
  p.capacity = 1'000'000;  // demand below the limit: every check allowed
  p.refill_per_second = 100'000;
  auto lim = limiter(make_redis_backend(redis.url(), generous()));
  std::uint64_t allowed = 0;
  for (int i = 0; i < 20'000; ++i) allowed += lim.check("warm", p).allowed ? 1 : 0;
  EXPECT_EQ(allowed, 20'000u);
  const auto st = lim.stats();
  const auto bs = lim.backend_stats();
  EXPECT_EQ(st.allowed, 20'000u);
  EXPECT_GT(st.leased_decisions, 19'000u);
  EXPECT_GT(st.leases, 0u);
  // A few asks for 20,000 checks (each ask sized to the demand of a lease_ttl).
  EXPECT_LT(bs.script_calls, 500u) << "leases " << st.leases;
}

TEST(RedisLeaseTest, RedisKilledLeasesRunOutThenTheFailureModeDecides) {
  test::redis_server redis;
  auto p = leased_bucket();
  // Never used up, however fast this machine checks locally.
  p.capacity = max_capacity;
  p.refill_per_second = max_refill_per_second;
  p.lease_ttl = 300ms;
  auto lim = limiter(make_redis_backend(redis.url(), generous()));
  // Demand grows the leases: a ttl's worth of checks is held.
  for (int round = 0; round < 3; ++round) {
    const auto until = steady::now() + 310ms;
    while (steady::now() < until) {
      const auto d = lim.check("k", p);
      ASSERT_TRUE(d.allowed) << d.remaining << " retry " << d.retry_after.count() << " degraded "
                             << d.degraded << " " << d.backend_error.message();
    }
  }
  redis.kill();
  const auto killed = steady::now();
  // While the last lease lasts, checks are decided from it, not degraded.
  const auto d = lim.check("k", p);
  EXPECT_TRUE(d.allowed);
  EXPECT_FALSE(d.degraded);
  // Then the policy's failure mode (closed): denied and degraded, within a ttl and the
  // backend's timeout.
  decision last;
  while (steady::now() < killed + 5s) {
    last = lim.check("k", p);
    if (last.degraded) break;
  }
  EXPECT_TRUE(last.degraded);
  EXPECT_FALSE(last.allowed);
  EXPECT_LT(steady::now() - killed, 300ms + 2 * generous().command_timeout + 500ms);
  EXPECT_GT(lim.stats().degraded_closed, 0u);
}

TEST(RedisLeaseTest, AResetReachesALeasedKey) {
  test::redis_server redis;
  policy p;
  p.capacity = 10;
  p.refill_per_second = 0.001;
  p.lease_ttl = 1000ms;
  auto lim = limiter(make_redis_backend(redis.url(), generous()));
  int allowed = 0;
  for (int i = 0; i < 30; ++i) allowed += lim.check("r", p).allowed ? 1 : 0;
  EXPECT_EQ(allowed, 10);  // exact: one instance leases at most what is there
  std::error_code ec;
  lim.reset("r", p, ec);
  ASSERT_FALSE(ec) << ec.message();
  // At once for this limiter, which dropped what it held and its denial.
  EXPECT_TRUE(lim.check("r", p).allowed);
}

TEST(RedisLeaseTest, CheckAllStaysAllOrNothingWithLeasedItems) {
  test::redis_server redis;
  policy leased;
  leased.capacity = 5;
  leased.refill_per_second = 0.001;
  leased.lease_ttl = 1000ms;
  policy plain = leased;
  plain.lease_ttl = 0ms;
  plain.capacity = 2;
  auto lim = limiter(make_redis_backend(redis.url(), generous()));
  const std::array<check_item, 2> items{check_item{"a", leased, 1}, check_item{"b", plain, 1}};
  int admitted = 0;
  for (int i = 0; i < 5; ++i) admitted += all_allowed(lim.check_all(items)) ? 1 : 0;
  EXPECT_EQ(admitted, 2);
  // The denied calls spent nothing of "a": 3 of its 5 are left for plain checks.
  int left = 0;
  for (int i = 0; i < 5; ++i) left += lim.check("a", leased).allowed ? 1 : 0;
  EXPECT_EQ(left, 3);
}

TEST(RedisLeaseTest, AnInstanceThatStopsCheckingGivesItsUnitsBackWhenTheyEnd) {
  test::redis_server redis;
  policy p;
  p.capacity = 1000;
  p.refill_per_second = 0.001;  // nothing refills within the test: only returns come back
  p.lease_ttl = 100ms;
  auto a = limiter(make_redis_backend(redis.url(), generous()));
  auto b = limiter(make_redis_backend(redis.url(), generous()));
  int allowed = 0;
  for (int i = 0; i < 200; ++i) allowed += a.check("idle", p).allowed ? 1 : 0;
  ASSERT_EQ(allowed, 200);
  // `a` holds what it leased and did not spend (its last ask may still be landing), and
  // checks nothing more, of any key.
  std::uint64_t held_then = 800;
  for (const auto until = steady::now() + 1s; held_then == 800 && steady::now() < until;)
    held_then = b.peek("idle", p).remaining;
  ASSERT_LT(held_then, 800u) << "a lease holds units beyond the 200 spent";
  // When its leases end, they go back without another check: the backend sees exactly
  // the 200 spent, and `a` counts every unit it leased and did not spend as returned
  // (when the reply arrives, which may be just after `b` sees it).
  const auto deadline = steady::now() + p.lease_ttl + 2s;
  std::uint64_t remaining = held_then, returned = 0, unspent = 1;
  while ((remaining != 800 || returned != unspent) && steady::now() < deadline) {
    std::this_thread::sleep_for(10ms);
    remaining = b.peek("idle", p).remaining;
    const auto st = a.stats();
    returned = st.lease_units_returned;
    unspent = st.leased_units - 200;
  }
  EXPECT_EQ(remaining, 800u);
  EXPECT_EQ(returned, unspent);
  EXPECT_GE(returned, 800u - held_then);
}

}  // namespace
