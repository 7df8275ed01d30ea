// Quota leases on a simulated clock (issue 33): N instances lease units of one limit from
// one server state (limit_lease, limit_lease_return) and decide locally (lease_ledger),
// with a round trip of latency, demand above the limit and leases given back when they
// end. What a user relies on:
// - in any window, admitted <= what the algorithm allows over it + rate x lease_ttl
//   (token bucket, GCRA, sliding window); fixed and sliding-counter windows stay exact per
//   aligned window;
// - the limit is used: over the run, admitted >= 95 % of what it allows, less the lease's
//   share of the limit's horizon;
// - with equal demand no instance starves.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <optional>
#include <random>
#include <vector>

#include <sluice/policy.hpp>

#include "algorithm/lease.hpp"
#include "algorithm/limit.hpp"
#include "core/lease_ledger.hpp"
#include "support/test_seed.hpp"

namespace sluice::detail {
namespace {

using sluice::test::seed_trace;
using sluice::test::test_seed;

struct scenario {
  policy pol;
  std::int64_t ttl_ms = 50;
  int instances = 4;
  std::int64_t latency_ms = 1;  // one way
  std::int64_t run_ms = 20'000;
  std::vector<double> demand_per_ms;  // per instance
};

struct outcome {
  std::vector<std::int64_t> admitted_at;  // per ms, all instances
  std::vector<std::int64_t> per_instance;
  std::int64_t total = 0;
};

// What arrives at the server (an ask or a return) or back at an instance (a grant).
struct message {
  std::int64_t at_ms = 0;
  int instance = 0;
  bool is_return = false;
  std::int64_t units = 0;  // ask: wanted; return: given back
  std::int64_t asked_at_ms = 0;
  std::int64_t granted_at_ms = 0;  // return: the lot's
};
struct grant_back {
  std::int64_t at_ms = 0;
  int instance = 0;
  limit_grant grant;
  std::int64_t asked_at_ms = 0;
  std::int64_t decided_ms = 0;  // the server's time: when the requests that waited were decided
};

outcome simulate(const scenario& s, std::mt19937_64& rng) {
  const limit_params params = to_limit_params(s.pol, 1);
  const auto limit = static_cast<std::int64_t>(limit_of(s.pol));
  std::optional<limit_state> state;
  std::vector<lease_ledger> ledgers;
  for (int i = 0; i < s.instances; ++i) ledgers.emplace_back(s.ttl_ms, limit);
  std::vector<std::int64_t> waiting(s.instances, 0);  // requests waiting for the ask in flight
  std::vector<std::int64_t> last_ask(s.instances, -1'000'000);
  std::deque<message> to_server;
  std::deque<grant_back> to_instances;
  std::vector<int> order(s.instances);
  for (int i = 0; i < s.instances; ++i) order[i] = i;
  outcome out;
  out.admitted_at.assign(s.run_ms, 0);
  out.per_instance.assign(s.instances, 0);
  const auto admit = [&](int i, std::int64_t now) {
    ++out.admitted_at[now];
    ++out.per_instance[i];
    ++out.total;
  };
  const auto send_ask = [&](int i, std::int64_t want, std::int64_t now) {
    to_server.push_back({now + s.latency_ms, i, false, want, now, 0});
  };

  for (std::int64_t now = 0; now < s.run_ms; ++now) {
    const std::int64_t now_us = now * 1000;
    // The server, in arrival order.
    while (!to_server.empty() && to_server.front().at_ms <= now) {
      const message m = to_server.front();
      to_server.pop_front();
      if (m.is_return) {
        limit_lease_return(params, m.units, m.granted_at_ms, state, now_us);
        continue;
      }
      last_ask[m.instance] = now;
      std::int64_t askers = 0;
      for (const auto t : last_ask) askers += now - t <= s.ttl_ms ? 1 : 0;
      const auto g = limit_lease(params, {m.units, askers, s.ttl_ms}, state, now_us);
      to_instances.push_back({now + s.latency_ms, m.instance, g, m.asked_at_ms, now});
    }
    // Grants reaching their instance: the waiting requests spend from them first.
    while (!to_instances.empty() && to_instances.front().at_ms <= now) {
      const grant_back b = to_instances.front();
      to_instances.pop_front();
      auto& l = ledgers[b.instance];
      const auto served = l.ask_done(
          {b.grant.granted, b.grant.valid_ms, b.grant.at_ms, b.grant.outcome.retry_after_ms},
          b.asked_at_ms, waiting[b.instance]);
      // Decided at the server, as a check is (its reply comes a latency later).
      for (std::int64_t n = 0; n < served; ++n) admit(b.instance, b.decided_ms);
      waiting[b.instance] = 0;  // the rest are denied: the server had no more
    }
    // Instances in a new order each ms: who reaches the server first is a matter of luck.
    std::shuffle(order.begin(), order.end(), rng);
    for (const int i : order) {
      auto& l = ledgers[i];
      for (const auto& lot : l.take_ended(now)) {
        to_server.push_back({now + s.latency_ms, i, true, lot.units, 0, lot.granted_at_ms});
      }
      std::poisson_distribution<int> arrivals(s.demand_per_ms[i]);
      for (int n = arrivals(rng); n > 0; --n) {
        l.note_demand(1, now);
        if (l.try_spend(1, now)) {
          admit(i, now);
        } else if (l.denied_for(now) > 0) {
          // denied here, as the last reply said
        } else if (l.asking()) {
          ++waiting[i];  // decided when the lease in flight comes
        } else if (const auto want = l.next_ask(now, 1)) {
          ++waiting[i];
          send_ask(i, *want, now);
        }
      }
      if (const auto want = l.next_ask(now)) send_ask(i, *want, now);  // ahead of need
    }
  }
  return out;
}

// The most admitted in any `len` ms window.
std::int64_t max_in_window(const std::vector<std::int64_t>& at, std::int64_t len) {
  std::int64_t sum = 0, best = 0;
  for (std::size_t t = 0; t < at.size(); ++t) {
    sum += at[t];
    if (t >= static_cast<std::size_t>(len)) sum -= at[t - len];
    best = std::max(best, sum);
  }
  return best;
}

// The most admitted in one window aligned to multiples of `len` ms.
std::int64_t max_in_aligned_window(const std::vector<std::int64_t>& at, std::int64_t len) {
  std::int64_t best = 0;
  for (std::size_t start = 0; start < at.size(); start += len) {
    std::int64_t sum = 0;
    for (std::size_t t = start; t < std::min(at.size(), start + len); ++t) sum += at[t];
    best = std::max(best, sum);
  }
  return best;
}

policy bucket(algorithm a, std::uint64_t capacity, double rate) {
  policy p;
  p.algorithm = a;
  p.capacity = capacity;
  p.refill_per_second = rate;
  return p;
}

policy window(algorithm a, std::uint64_t limit, std::int64_t window_ms) {
  policy p;
  p.algorithm = a;
  p.limit = limit;
  p.window = std::chrono::milliseconds{window_ms};
  return p;
}

// Units the limit allows per ms in the long run.
double rate_per_ms(const policy& p) {
  return is_window(p.algorithm)
             ? static_cast<double>(p.limit) / static_cast<double>(p.window.count())
             : p.refill_per_second / 1000.0;
}

// What the limit allows over the whole run, with no leases.
double allowed_over_run(const policy& p, std::int64_t run_ms) {
  const double steady = rate_per_ms(p) * static_cast<double>(run_ms);
  return is_window(p.algorithm) ? steady : steady + static_cast<double>(p.capacity);
}

void expect_within_bound(const scenario& s, const outcome& o) {
  const auto& p = s.pol;
  const double extra = rate_per_ms(p) * static_cast<double>(s.ttl_ms);
  switch (p.algorithm) {
    case algorithm::token_bucket:
    case algorithm::gcra:
      for (const std::int64_t len : {10, 100, 1000, 5000}) {
        const double allows = static_cast<double>(p.capacity) + rate_per_ms(p) * len;
        EXPECT_LE(static_cast<double>(max_in_window(o.admitted_at, len)), allows + extra + 1)
            << "window " << len << " ms";
      }
      break;
    case algorithm::sliding_window:
      EXPECT_LE(max_in_window(o.admitted_at, p.window.count()), static_cast<std::int64_t>(p.limit));
      break;
    case algorithm::fixed_window:
    case algorithm::sliding_window_counter:
      EXPECT_LE(max_in_aligned_window(o.admitted_at, p.window.count()),
                static_cast<std::int64_t>(p.limit));
      break;
  }
  // A sliding window's lease counts valid_ms longer than a check (lease.hpp): that share
  // of the limit is not used.
  const double used =
      p.algorithm == algorithm::sliding_window
          ? static_cast<double>(p.window.count()) / static_cast<double>(p.window.count() + s.ttl_ms)
          : 1.0;
  // Units held and not spent when a lease ends are the only other loss: more of them the
  // longer a lease is against the limit's horizon (a window, or a bucket's refill time).
  const double horizon_ms = is_window(p.algorithm)
                                ? static_cast<double>(p.window.count())
                                : static_cast<double>(p.capacity) / rate_per_ms(p);
  const double kept = 0.95 - static_cast<double>(s.ttl_ms) / horizon_ms;
  EXPECT_GE(static_cast<double>(o.total), kept * used * allowed_over_run(p, s.run_ms));
}

std::vector<policy> every_algorithm() {
  return {bucket(algorithm::token_bucket, 100, 100), bucket(algorithm::gcra, 100, 100),
          window(algorithm::sliding_window, 100, 1000),
          window(algorithm::sliding_window_counter, 100, 1000),
          window(algorithm::fixed_window, 100, 1000)};
}

TEST(LeaseBound, EqualDemandAboveTheLimitStaysWithinTheBoundAndNobodyStarves) {
  const auto seed = test_seed(33);
  SCOPED_TRACE(seed_trace(seed));
  std::mt19937_64 rng(seed);
  for (const auto& pol : every_algorithm()) {
    SCOPED_TRACE(std::string(to_string(pol.algorithm)));
    scenario s;
    s.pol = pol;
    s.demand_per_ms.assign(s.instances, 3 * rate_per_ms(pol));  // 4 x 3: 12x the limit
    const auto o = simulate(s, rng);
    expect_within_bound(s, o);
    for (int i = 0; i < s.instances; ++i) {
      EXPECT_GE(o.per_instance[i], o.total / s.instances / 2) << "instance " << i;
    }
  }
}

TEST(LeaseBound, RandomDemandLatencyAndTtlStayWithinTheBound) {
  const auto seed = test_seed(3301);
  SCOPED_TRACE(seed_trace(seed));
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> instances(1, 8);
  std::uniform_int_distribution<std::int64_t> ttl(1, 200), latency(0, 5);
  std::uniform_real_distribution<double> share(0.0, 1.0);
  for (int round = 0; round < 6; ++round) {
    for (const auto& pol : every_algorithm()) {
      scenario s;
      s.pol = pol;
      s.run_ms = 8000;
      s.instances = instances(rng);
      s.ttl_ms = ttl(rng);
      s.latency_ms = latency(rng);
      // Skewed demand whose sum is 1.5x to 10x the limit's rate.
      std::vector<double> w(s.instances);
      double sum = 0;
      for (auto& x : w) sum += (x = 0.05 + share(rng));
      const double total = rate_per_ms(pol) * (1.5 + 8.5 * share(rng));
      for (auto x : w) s.demand_per_ms.push_back(total * x / sum);
      SCOPED_TRACE(::testing::Message()
                   << to_string(pol.algorithm) << ", " << s.instances << " instances, ttl "
                   << s.ttl_ms << " ms, latency " << s.latency_ms << " ms");
      expect_within_bound(s, simulate(s, rng));
    }
  }
}

TEST(LeaseGrant, NeverMoreThanAskedNorTheFairShareAndTheLastUnitsOneAtATime) {
  const policy pol = bucket(algorithm::token_bucket, 100, 1);
  const limit_params p = to_limit_params(pol, 1);
  std::optional<limit_state> state;
  auto g = limit_lease(p, {30, 1, 50}, state, 0);
  EXPECT_TRUE(g.outcome.allowed);
  EXPECT_EQ(g.granted, 30);
  EXPECT_EQ(g.outcome.remaining, 70);
  g = limit_lease(p, {100, 2, 50}, state, 0);  // half of 70
  EXPECT_EQ(g.granted, 35);
  g = limit_lease(p, {100, 40, 50}, state, 0);  // 35 / 40 < 1: one, as a check
  EXPECT_EQ(g.granted, 1);
  EXPECT_EQ(g.outcome.remaining, 34);
  for (int i = 0; i < 34; ++i) limit_lease(p, {1, 1, 50}, state, 0);
  g = limit_lease(p, {5, 1, 50}, state, 0);
  EXPECT_FALSE(g.outcome.allowed);
  EXPECT_EQ(g.granted, 0);
  EXPECT_EQ(g.outcome.retry_after_ms, 1000);
}

TEST(LeaseGrant, AFixedWindowLeaseEndsWithItsWindowAndItsReturnStaysThere) {
  const policy pol = window(algorithm::fixed_window, 100, 1000);
  const limit_params p = to_limit_params(pol, 1);
  std::optional<limit_state> state;
  const auto g = limit_lease(p, {40, 1, 500}, state, 900'000);  // 100 ms before the window ends
  EXPECT_EQ(g.granted, 40);
  EXPECT_EQ(g.valid_ms, 100);
  limit_lease_return(p, 40, g.at_ms, state, 1'000'000);  // the next window: nothing to return
  EXPECT_EQ(limit_peek(p, state, 1'000'000).remaining, 100);
  const auto next = limit_lease(p, {10, 1, 500}, state, 1'000'000);
  limit_lease_return(p, 10, next.at_ms, state, 1'200'000);  // the same window: back
  EXPECT_EQ(limit_peek(p, state, 1'200'000).remaining, 100);
}

TEST(LeaseGrant, ASlidingWindowReturnGoesToItsOwnEntry) {
  const policy pol = window(algorithm::sliding_window, 10, 1000);
  const limit_params p = to_limit_params(pol, 1);
  std::optional<limit_state> state;
  const auto first = limit_lease(p, {5, 1, 100}, state, 0);
  limit_lease(p, {5, 1, 100}, state, 500'000);
  limit_lease_return(p, 5, first.at_ms, state, 600'000);
  // The first lease's units are gone; the second's are logged at its end (600 ms) and
  // count for a window after it, until 1600 ms.
  EXPECT_EQ(limit_peek(p, state, 600'000).remaining, 5);
  EXPECT_EQ(limit_peek(p, state, 1'599'000).remaining, 5);
  EXPECT_EQ(limit_peek(p, state, 1'600'000).remaining, 10);
}

TEST(LeaseLedger, SpendsTheEarliestEndingLeaseFirstAndGivesBackWhatEndedUnspent) {
  lease_ledger l(100, 1000);
  const auto ask = l.next_ask(0, 1);
  ASSERT_TRUE(ask);
  EXPECT_FALSE(l.next_ask(0, 1)) << "one ask at a time";
  l.ask_done({10, 100, 7, 0}, 0);
  ASSERT_TRUE(l.next_ask(10, 20));
  l.ask_done({5, 100, 17, 0}, 10);
  EXPECT_EQ(l.held(20), 15);
  EXPECT_TRUE(l.try_spend(12, 20));  // 10 from the first lease, 2 from the second
  const auto ended = l.take_ended(100);
  EXPECT_TRUE(ended.empty()) << "the first lease was spent out";
  EXPECT_EQ(l.held(100), 3);
  EXPECT_EQ(l.take_ended(110), (std::vector<lease_lot>{{3, 110, 17}}));
  EXPECT_FALSE(l.try_spend(1, 110));
}

TEST(LeaseLedger, AsksAheadOfNeedAtTheRecentRate) {
  lease_ledger l(100, 1000);
  for (int t = 0; t < 100; ++t) l.note_demand(1, t);  // 100 per ttl
  const auto first = l.next_ask(100);
  ASSERT_TRUE(first);
  EXPECT_EQ(*first, 100);
  l.ask_done({100, 100, 100, 0}, 100);
  EXPECT_FALSE(l.next_ask(101)) << "a full lease held";
  for (int t = 101; t < 160; ++t) {
    l.note_demand(1, t);
    ASSERT_TRUE(l.try_spend(1, t));
  }
  EXPECT_TRUE(l.next_ask(160)) << "41 left, less than half of the demand per ttl";
}

TEST(LeaseLedger, ADenialHoldsAsksBackForItsRetryAtMostATtlOrUntilUnitsGoBack) {
  lease_ledger l(100, 1000);
  ASSERT_TRUE(l.next_ask(0, 1));
  l.ask_done({0, 0, 0, 500}, 0);  // denied: a unit in 500 ms
  EXPECT_EQ(l.denied_for(10), 90) << "a ttl, not the whole retry";
  EXPECT_FALSE(l.next_ask(10, 1));
  EXPECT_TRUE(l.next_ask(100, 1));
  l.ask_done({3, 100, 100, 0}, 100);
  ASSERT_TRUE(l.next_ask(150, 10));
  l.ask_done({0, 0, 150, 1000}, 150);
  EXPECT_GT(l.denied_for(160), 0);
  EXPECT_EQ(l.take_ended(200).size(), 1u);  // 3 units go back...
  EXPECT_EQ(l.denied_for(200), 0) << "...and may be asked for again";
}

}  // namespace
}  // namespace sluice::detail
