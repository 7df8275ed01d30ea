// The algorithms beside the token bucket (gcra, sliding_window, sliding_window_counter,
// fixed_window) as pure steps: policy validation per algorithm, exact decisions computed by
// hand, properties checked by brute force over seeded random request streams, peek, the
// failure modes' assumed decisions and the all-or-nothing decision over mixed algorithms.
// No clock: every time is passed in (milliseconds here, microseconds to the math).
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <optional>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include <sluice/error.hpp>
#include <sluice/policy.hpp>

#include "algorithm/limit.hpp"

#include "support/policies.hpp"

namespace sluice::detail {
namespace {

using std::chrono::milliseconds;

constexpr std::int64_t us_per_ms = 1000;

constexpr algorithm all_algorithms[] = {algorithm::token_bucket, algorithm::gcra,
                                        algorithm::sliding_window,
                                        algorithm::sliding_window_counter, algorithm::fixed_window};

using sluice::test::bucket;
using sluice::test::window;

// A policy of algorithm `a` that admits `n` at once, with a refill or window of about 1 s.
policy of(algorithm a, std::uint64_t n) {
  return is_window(a) ? window(a, n, 1000) : bucket(a, n, static_cast<double>(n));
}

// An outcome's four numbers, comparable and printable.
struct seen {
  bool allowed = false;
  std::int64_t remaining = 0;
  std::int64_t retry_ms = 0;
  std::int64_t reset_ms = 0;
  friend bool operator==(const seen&, const seen&) = default;
  friend std::ostream& operator<<(std::ostream& os, const seen& s) {
    return os << "{allowed " << s.allowed << ", remaining " << s.remaining << ", retry "
              << s.retry_ms << " ms, reset " << s.reset_ms << " ms}";
  }
};

seen see(const limit_outcome& o) {
  return {o.allowed, o.remaining, o.retry_after_ms, o.reset_after_ms};
}

// One key as a backend keeps it: its policy and its stored state. Times in milliseconds.
struct key_sim {
  policy pol;
  std::optional<limit_state> state;

  limit_outcome take(std::int64_t now_ms, std::uint64_t cost = 1) {
    return limit_decide(to_limit_params(pol, cost), state, now_ms * us_per_ms);
  }
  limit_outcome peek(std::int64_t now_ms, std::uint64_t cost = 1) const {
    return limit_peek(to_limit_params(pol, cost), state, now_ms * us_per_ms);
  }
  // What deciding would answer, on a copy: the state stays as it is.
  limit_outcome would(std::int64_t now_ms, std::uint64_t cost = 1) const {
    auto copy = state;
    return limit_decide(to_limit_params(pol, cost), copy, now_ms * us_per_ms);
  }
};

// ---------------------------------------------------------------------------------------
// 1. Policy validation per algorithm.

TEST(AlgorithmPolicyTest, EveryAlgorithmAcceptsItsOwnParameters) {
  for (const auto a : all_algorithms) {
    EXPECT_FALSE(validate(of(a, 10))) << to_string(a);
    EXPECT_FALSE(validate("k", of(a, 10), 10)) << to_string(a);  // cost == limit_of
  }
}

TEST(AlgorithmPolicyTest, BucketsRefuseWindowParameters) {
  for (const auto a : {algorithm::token_bucket, algorithm::gcra}) {
    auto p = bucket(a, 10, 1);
    p.limit = 10;
    EXPECT_EQ(validate(p), errc::mismatched_parameters) << to_string(a);
    p = bucket(a, 10, 1);
    p.window = milliseconds{1000};
    EXPECT_EQ(validate(p), errc::mismatched_parameters) << to_string(a);
  }
}

TEST(AlgorithmPolicyTest, WindowsRefuseBucketParameters) {
  for (const auto a :
       {algorithm::sliding_window, algorithm::sliding_window_counter, algorithm::fixed_window}) {
    auto p = window(a, 10, 1000);
    p.capacity = 10;
    EXPECT_EQ(validate(p), errc::mismatched_parameters) << to_string(a);
    p = window(a, 10, 1000);
    p.refill_per_second = 1;
    EXPECT_EQ(validate(p), errc::mismatched_parameters) << to_string(a);
    // A bucket policy relabelled as a window is the same mistake.
    auto b = bucket(algorithm::token_bucket, 10, 1);
    b.algorithm = a;
    EXPECT_EQ(validate(b), errc::mismatched_parameters) << to_string(a);
  }
}

TEST(AlgorithmPolicyTest, WindowLengthFromOneMillisecondTo366Days) {
  for (const auto a :
       {algorithm::sliding_window, algorithm::sliding_window_counter, algorithm::fixed_window}) {
    EXPECT_EQ(validate(window(a, 10, 0)), errc::invalid_window) << to_string(a);
    EXPECT_EQ(validate(window(a, 10, -1)), errc::invalid_window) << to_string(a);
    EXPECT_FALSE(validate(window(a, 10, 1))) << to_string(a);
    EXPECT_FALSE(validate(window(a, 1, max_window.count()))) << to_string(a);
    EXPECT_EQ(validate(window(a, 1, max_window.count() + 1)), errc::invalid_window) << to_string(a);
  }
  EXPECT_EQ(max_window, milliseconds{366LL * 24 * 3600 * 1000});
}

TEST(AlgorithmPolicyTest, WindowLimitFromOneToMaxCapacity) {
  for (const auto a : {algorithm::sliding_window_counter, algorithm::fixed_window}) {
    EXPECT_EQ(validate(window(a, 0, 1000)), errc::invalid_limit) << to_string(a);
    EXPECT_FALSE(validate(window(a, 1, 1000))) << to_string(a);
    EXPECT_FALSE(validate(window(a, max_capacity, 1000))) << to_string(a);
    EXPECT_EQ(validate(window(a, max_capacity + 1, 1000)), errc::invalid_limit) << to_string(a);
  }
  EXPECT_EQ(validate(window(algorithm::sliding_window, 0, 1000)), errc::invalid_limit);
}

TEST(AlgorithmPolicyTest, SlidingWindowLimitIsBoundedByItsLog) {
  const auto a = algorithm::sliding_window;
  EXPECT_FALSE(validate(window(a, max_sliding_window_limit, 1000)));
  EXPECT_EQ(validate(window(a, max_sliding_window_limit + 1, 1000)), errc::invalid_limit);
  EXPECT_EQ(max_sliding_window_limit, 10'000u);
  // The other windows have no such bound.
  EXPECT_FALSE(validate(window(algorithm::fixed_window, max_sliding_window_limit + 1, 1000)));
}

TEST(AlgorithmPolicyTest, SlidingWindowCounterBoundsLimitTimesWindow) {
  const auto a = algorithm::sliding_window_counter;
  // limit x window_ms <= 4e15.
  EXPECT_FALSE(validate(window(a, 1'000'000, 4'000'000'000)));
  EXPECT_EQ(validate(window(a, 1'000'000, 4'000'000'001)), errc::invalid_limit);
  EXPECT_EQ(validate(window(a, 1'000'001, 4'000'000'000)), errc::invalid_limit);
  EXPECT_EQ(validate(window(a, max_capacity, max_window.count())), errc::invalid_limit);
  // fixed_window takes the same numbers.
  EXPECT_FALSE(validate(window(algorithm::fixed_window, max_capacity, max_window.count())));
}

TEST(AlgorithmPolicyTest, GcraBoundsRateAndBurst) {
  const auto g = algorithm::gcra;
  EXPECT_FALSE(validate(bucket(g, 10, max_gcra_refill_per_second)));
  EXPECT_EQ(validate(bucket(g, 10, 1'000'001)), errc::invalid_gcra_rate);
  EXPECT_EQ(validate(bucket(g, 10, 5e8)), errc::invalid_gcra_rate);
  EXPECT_FALSE(validate(bucket(algorithm::token_bucket, 10, 5e8)));
  // Past the bucket's own bound it is the bucket's error.
  EXPECT_EQ(validate(bucket(g, 10, 2e9)), errc::invalid_refill_rate);
  // capacity x T <= 1e15 us: at 1/s (T = 1e6 us) a capacity of 1e9 fits exactly ...
  EXPECT_FALSE(validate(bucket(g, max_capacity, 1)));
  // ... at 0.999/s (T = 1'001'001 us) it does not; token_bucket has no such bound.
  EXPECT_EQ(validate(bucket(g, max_capacity, 0.999)), errc::invalid_gcra_rate);
  EXPECT_FALSE(validate(bucket(algorithm::token_bucket, max_capacity, 0.999)));
  // At the slowest rate (T = 1e9 us) at most 1e6 tokens.
  EXPECT_FALSE(validate(bucket(g, 1'000'000, min_refill_per_second)));
  EXPECT_EQ(validate(bucket(g, 1'000'001, min_refill_per_second)), errc::invalid_gcra_rate);
}

TEST(AlgorithmPolicyTest, CostIsBoundedByLimitOf) {
  for (const auto a : all_algorithms) {
    const auto p = of(a, 7);
    EXPECT_EQ(limit_of(p), 7u) << to_string(a);
    EXPECT_FALSE(validate("k", p, 7)) << to_string(a);
    EXPECT_EQ(validate("k", p, 8), errc::cost_exceeds_capacity) << to_string(a);
    EXPECT_EQ(validate("k", p, 0), errc::invalid_cost) << to_string(a);
  }
}

TEST(AlgorithmPolicyTest, NamesRoundTrip) {
  const std::map<algorithm, std::string> names{
      {algorithm::token_bucket, "token_bucket"},
      {algorithm::gcra, "gcra"},
      {algorithm::sliding_window, "sliding_window"},
      {algorithm::sliding_window_counter, "sliding_window_counter"},
      {algorithm::fixed_window, "fixed_window"}};
  for (const auto& [a, name] : names) {
    EXPECT_EQ(to_string(a), name);
    EXPECT_EQ(parse_algorithm(name), a) << name;
  }
  EXPECT_EQ(parse_algorithm("GCRA"), std::nullopt);
  EXPECT_EQ(parse_algorithm("sliding_window_"), std::nullopt);
  EXPECT_EQ(parse_algorithm(""), std::nullopt);
  EXPECT_FALSE(is_window(algorithm::token_bucket));
  EXPECT_FALSE(is_window(algorithm::gcra));
  EXPECT_TRUE(is_window(algorithm::sliding_window));
  EXPECT_TRUE(is_window(algorithm::sliding_window_counter));
  EXPECT_TRUE(is_window(algorithm::fixed_window));
}

TEST(AlgorithmPolicyTest, ParamsInIntegerUnits) {
  // gcra: T = 1e6 / rate us; the burst B = capacity x T; a cost of c is c x T.
  EXPECT_EQ(to_limit_params(bucket(algorithm::gcra, 5, 10), 2),
            (limit_params{algorithm::gcra, 100'000, 500'000, 200'000}));
  EXPECT_EQ(gcra_time_per_token_us(3), 333'333);  // rounded to the nearest microsecond
  EXPECT_EQ(gcra_time_per_token_us(max_gcra_refill_per_second), 1);
  EXPECT_EQ(to_limit_params(window(algorithm::sliding_window, 7, 60'000), 3),
            (limit_params{algorithm::sliding_window, 7, 60'000, 3}));
  // The public decision reports limit_of(), for windows the limit.
  const auto d = to_decision(limit_outcome{false, 2, 30, 40}, 7);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.limit, 7u);
  EXPECT_EQ(d.remaining, 2u);
  EXPECT_EQ(d.retry_after, milliseconds{30});
  EXPECT_EQ(d.reset_after, milliseconds{40});
}

// ---------------------------------------------------------------------------------------
// 2. Exact decisions, computed by hand.

TEST(GcraTest, BurstCostAndExactRetry) {
  // capacity 5 at 10/s: T = 100 ms, the burst B = 500 ms.
  key_sim k{bucket(algorithm::gcra, 5, 10), std::nullopt};
  const std::int64_t t = 1'000;
  EXPECT_EQ(see(k.take(t)), (seen{true, 4, 0, 100}));     // TAT = t + 100
  EXPECT_EQ(see(k.take(t, 2)), (seen{true, 2, 0, 300}));  // TAT = t + 300
  EXPECT_EQ(see(k.take(t, 2)), (seen{true, 0, 0, 500}));  // TAT = t + 500 = t + B
  EXPECT_EQ(see(k.take(t)), (seen{false, 0, 100, 500}));
  EXPECT_EQ(see(k.take(t + 99)), (seen{false, 0, 1, 401}));
  EXPECT_EQ(see(k.take(t + 100)), (seen{true, 0, 0, 500}));
  // Cost 3 needs 3 x T of room: TAT is t + 600, so 300 ms after the last admission.
  EXPECT_EQ(see(k.take(t + 100, 3)), (seen{false, 0, 300, 500}));
  EXPECT_EQ(see(k.take(t + 399, 3)), (seen{false, 2, 1, 201}));
  EXPECT_EQ(see(k.take(t + 400, 3)), (seen{true, 0, 0, 500}));
  // Past TAT the bucket is full again, as with no state.
  EXPECT_EQ(see(k.take(t + 900)), (seen{true, 4, 0, 100}));
}

TEST(GcraTest, RetryIsRoundedUpToTheMillisecond) {
  // 3/s: T = 333'333 us.
  key_sim k{bucket(algorithm::gcra, 1, 3), std::nullopt};
  EXPECT_EQ(see(k.take(0)), (seen{true, 0, 0, 334}));
  EXPECT_EQ(see(k.take(0)), (seen{false, 0, 334, 334}));
  EXPECT_EQ(see(k.take(333)), (seen{false, 0, 1, 1}));   // 333 us short
  EXPECT_EQ(see(k.take(334)), (seen{true, 0, 0, 334}));  // TAT was 333.333 ms: now + T
}

TEST(FixedWindowTest, CountsPerAlignedWindow) {
  // 3 per second, windows [2000, 3000), [3000, 4000), ...
  key_sim k{window(algorithm::fixed_window, 3, 1000), std::nullopt};
  EXPECT_EQ(see(k.take(2'500, 2)), (seen{true, 1, 0, 500}));
  EXPECT_EQ(see(k.take(2'500, 2)), (seen{false, 1, 500, 500}));
  EXPECT_EQ(see(k.take(2'999)), (seen{true, 0, 0, 1}));
  EXPECT_EQ(see(k.take(2'999)), (seen{false, 0, 1, 1}));
  EXPECT_EQ(see(k.take(3'000, 3)), (seen{true, 0, 0, 1'000}));  // a new window
  EXPECT_EQ(see(k.take(3'999)), (seen{false, 0, 1, 1}));
  // A window with nothing in it: the count of the one before is no count.
  EXPECT_EQ(see(k.take(5'250)), (seen{true, 2, 0, 750}));
}

TEST(FixedWindowTest, WindowsAreAlignedToTheEpochNotToTheFirstRequest) {
  key_sim k{window(algorithm::fixed_window, 1, 60'000), std::nullopt};
  EXPECT_EQ(see(k.take(30'000)), (seen{true, 0, 0, 30'000}));
  EXPECT_EQ(see(k.take(59'999)), (seen{false, 0, 1, 1}));
  EXPECT_EQ(see(k.take(60'000)), (seen{true, 0, 0, 60'000}));
  EXPECT_EQ(see(k.take(60'001)), (seen{false, 0, 59'999, 59'999}));

  key_sim last{window(algorithm::fixed_window, 2, 60'000), std::nullopt};
  EXPECT_EQ(see(last.take(59'999, 2)), (seen{true, 0, 0, 1}));
  EXPECT_EQ(see(last.take(60'000, 2)), (seen{true, 0, 0, 60'000}));  // 4 within 2 ms
}

TEST(SlidingWindowTest, ExactLogWithCostAndRetry) {
  // 3 in any 1000 ms: a request at t counts until t + 1000.
  key_sim k{window(algorithm::sliding_window, 3, 1000), std::nullopt};
  EXPECT_EQ(see(k.take(10'000)), (seen{true, 2, 0, 1'000}));
  EXPECT_EQ(see(k.take(10'200, 2)), (seen{true, 0, 0, 1'000}));
  // Full: the oldest request (10'000) leaves at 11'000.
  EXPECT_EQ(see(k.take(10'500)), (seen{false, 0, 500, 700}));
  EXPECT_EQ(see(k.take(10'999)), (seen{false, 0, 1, 201}));
  EXPECT_EQ(see(k.take(11'000)), (seen{true, 0, 0, 1'000}));
  // Cost 2 needs the two of 10'200 gone (at 11'200); cost 3 also the one of 11'000.
  EXPECT_EQ(see(k.take(11'000, 2)), (seen{false, 0, 200, 1'000}));
  EXPECT_EQ(see(k.take(11'000, 3)), (seen{false, 0, 1'000, 1'000}));
  EXPECT_EQ(see(k.take(11'199, 2)), (seen{false, 0, 1, 801}));
  EXPECT_EQ(see(k.take(11'200, 2)), (seen{true, 0, 0, 1'000}));
}

TEST(SlidingWindowTest, OneLogEntryPerMillisecond) {
  key_sim k{window(algorithm::sliding_window, 100, 1000), std::nullopt};
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(k.take(5'000).allowed);
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(k.take(5'001, 2).allowed);
  ASSERT_TRUE(k.state);
  EXPECT_EQ(k.state->log, (std::vector<log_entry>{{5'000, 10}, {5'001, 20}}));
  // Entries out of the window are dropped when the key is next written.
  ASSERT_TRUE(k.take(6'000).allowed);
  EXPECT_EQ(k.state->log, (std::vector<log_entry>{{5'001, 20}, {6'000, 1}}));
}

TEST(SlidingWindowCounterTest, WeightsThePreviousWindow) {
  // 10 per 1000 ms; the window [0, 1000) gets 8, then [1000, 2000) is decided with those 8
  // weighted by (1000 - e) / 1000, e the time into it.
  key_sim k{window(algorithm::sliding_window_counter, 10, 1000), std::nullopt};
  EXPECT_EQ(see(k.take(100, 8)), (seen{true, 2, 0, 1'900}));  // counts until 2000
  // e = 250: 8 x 750 = 6000 of the 10 x 1000.
  EXPECT_EQ(see(k.take(1'250)), (seen{true, 3, 0, 1'750}));
  EXPECT_EQ(see(k.take(1'250, 3)), (seen{true, 0, 0, 1'750}));  // 6000 + 4 x 1000 = 10000
  // 6000 + 5 x 1000 > 10000; allowed once 8 x (1000 - e) <= 5000: e >= 375.
  EXPECT_EQ(see(k.take(1'250)), (seen{false, 0, 125, 1'750}));
  EXPECT_EQ(see(k.take(1'374)), (seen{false, 0, 1, 1'626}));
  EXPECT_EQ(see(k.take(1'375)), (seen{true, 0, 0, 1'625}));
  // Cost 6 with 5 in this window: only in the next, where these 5 weigh (1000 - e) / 1000:
  // 5 x (1000 - e) + 6000 <= 10000 from e = 200, at 2200.
  EXPECT_EQ(see(k.take(1'375, 6)), (seen{false, 0, 825, 1'625}));
  EXPECT_EQ(see(k.take(2'199, 6)), (seen{false, 5, 1, 801}));
  EXPECT_EQ(see(k.take(2'200, 6)), (seen{true, 0, 0, 1'800}));
  // Two windows later nothing of these counts.
  EXPECT_EQ(see(k.take(4'000, 10)), (seen{true, 0, 0, 2'000}));
}

TEST(SlidingWindowCounterTest, NeverMoreThanTheLimitInOneAlignedWindow) {
  // Even with the previous window empty, the current window's count alone is capped.
  key_sim k{window(algorithm::sliding_window_counter, 4, 1000), std::nullopt};
  EXPECT_EQ(see(k.take(5'000, 4)), (seen{true, 0, 0, 2'000}));
  // Next window: 4 x (1000 - e) + 1000 <= 4000 from e = 250, at 6250.
  EXPECT_EQ(see(k.take(5'999)), (seen{false, 0, 251, 1'001}));
  EXPECT_EQ(see(k.take(6'249)), (seen{false, 0, 1, 751}));
  EXPECT_EQ(see(k.take(6'250)), (seen{true, 0, 0, 1'750}));
}

TEST(AlgorithmDecideTest, FirstRequestOnNoState) {
  // A fresh key admits up to limit_of at once; reset_after says how long that counts.
  const std::int64_t t = 1'234'567;
  struct row {
    policy p;
    std::uint64_t cost;
    seen want;
  };
  const row rows[] = {
      {bucket(algorithm::token_bucket, 10, 2), 3, {true, 7, 0, 1'500}},
      {bucket(algorithm::gcra, 10, 2), 3, {true, 7, 0, 1'500}},
      {window(algorithm::sliding_window, 10, 60'000), 3, {true, 7, 0, 60'000}},
      // 1'234'567 is 34'567 into its minute: the count weighs until two windows on.
      {window(algorithm::sliding_window_counter, 10, 60'000), 3, {true, 7, 0, 85'433}},
      {window(algorithm::fixed_window, 10, 60'000), 3, {true, 7, 0, 25'433}},
      {window(algorithm::fixed_window, 10, 60'000), 10, {true, 0, 0, 25'433}},
  };
  for (const auto& r : rows) {
    key_sim k{r.p, std::nullopt};
    EXPECT_EQ(see(k.take(t, r.cost)), r.want) << to_string(r.p.algorithm);
  }
}

TEST(AlgorithmDecideTest, ADenialSpendsNothing) {
  for (const auto a : all_algorithms) {
    key_sim k{of(a, 3), std::nullopt};
    ASSERT_TRUE(k.take(10'000, 2).allowed);
    const auto before = k.state;
    ASSERT_FALSE(k.take(10'001, 2).allowed) << to_string(a);
    EXPECT_EQ(k.state, before) << to_string(a);
    EXPECT_TRUE(k.take(10'001, 1).allowed) << to_string(a);
  }
}

TEST(AlgorithmDecideTest, ALimitLoweredBelowWhatWasSpentLeavesNothingRemaining) {
  // A policy reloaded with a lower limit while a key has spent more than it: the key is
  // denied with nothing remaining (never a negative count wrapped into a huge unsigned
  // `remaining`) and an exact retry.
  struct row {
    policy before, after;
  };
  const row rows[] = {
      {bucket(algorithm::gcra, 10, 10), bucket(algorithm::gcra, 5, 10)},
      {window(algorithm::sliding_window, 10, 1'000), window(algorithm::sliding_window, 5, 1'000)},
      {window(algorithm::sliding_window_counter, 10, 1'000),
       window(algorithm::sliding_window_counter, 5, 1'000)},
      {window(algorithm::fixed_window, 10, 1'000), window(algorithm::fixed_window, 5, 1'000)},
  };
  for (const auto& r : rows) {
    SCOPED_TRACE(std::string(to_string(r.before.algorithm)));
    key_sim k{r.before, std::nullopt};
    for (int i = 0; i < 4; ++i) ASSERT_TRUE(k.take(20'000 + 10 * i, 2).allowed);
    k.pol = r.after;
    for (const auto& o : {k.peek(20'050), k.would(20'050)}) {
      EXPECT_FALSE(o.allowed);
      EXPECT_EQ(o.remaining, 0);
      EXPECT_EQ(to_decision(o, limit_of(r.after)).remaining, 0u);
      ASSERT_GT(o.retry_after_ms, 0);
      EXPECT_TRUE(k.would(20'050 + o.retry_after_ms).allowed);
      EXPECT_FALSE(k.would(20'050 + o.retry_after_ms - 1).allowed);
    }
  }
}

// ---------------------------------------------------------------------------------------
// 3. Properties, by brute force over seeded random streams.

struct request {
  std::int64_t t_ms;
  std::uint64_t cost;
};

// Non-decreasing times: mostly gaps below max_gap_ms (several requests in one millisecond
// too), now and then a gap of up to `long_gap_ms`.
std::vector<request> stream(unsigned seed, std::size_t n, std::int64_t max_gap_ms,
                            std::uint64_t max_cost, std::int64_t long_gap_ms = 0) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<std::int64_t> gap(0, max_gap_ms);
  std::uniform_int_distribution<std::int64_t> long_gap(0, std::max<std::int64_t>(long_gap_ms, 1));
  std::uniform_int_distribution<std::uint64_t> cost(1, max_cost);
  std::uniform_int_distribution<int> percent(0, 99);
  std::vector<request> out;
  out.reserve(n);
  std::int64_t t = 1'700'000'000'000 + static_cast<std::int64_t>(seed) * 7;  // a Unix time
  for (std::size_t i = 0; i < n; ++i) {
    t += (long_gap_ms > 0 && percent(rng) < 2) ? long_gap(rng) : gap(rng);
    out.push_back({t, cost(rng)});
  }
  return out;
}

constexpr unsigned seeds[] = {1, 2, 3, 42, 2024};

TEST(AlgorithmPropertyTest, SlidingWindowIsExactInEveryWindow) {
  // Never more than the limit in any window of length W (checked at every admission, the
  // window ending there), and never a denial when the request would have fit (it is exact,
  // not merely safe).
  for (const std::int64_t w : {1'000, 7}) {
    for (const unsigned seed : seeds) {
      SCOPED_TRACE("seed " + std::to_string(seed) + " window " + std::to_string(w));
      const std::int64_t limit = 10;
      key_sim k{window(algorithm::sliding_window, limit, w), std::nullopt};
      std::vector<request> admitted;
      std::size_t lo = 0;
      std::int64_t in_window = 0;  // admitted cost in (t - W, t]
      for (const auto& r : stream(seed, 5'000, w / 7 + 1, 4, 3 * w)) {
        while (lo < admitted.size() && admitted[lo].t_ms <= r.t_ms - w) {
          in_window -= static_cast<std::int64_t>(admitted[lo].cost);
          ++lo;
        }
        const auto c = static_cast<std::int64_t>(r.cost);
        const auto o = k.take(r.t_ms, r.cost);
        ASSERT_EQ(o.allowed, in_window + c <= limit) << "at " << r.t_ms;
        if (o.allowed) {
          admitted.push_back(r);
          in_window += c;
          ASSERT_LE(in_window, limit);
          ASSERT_EQ(o.remaining, limit - in_window);
          ASSERT_EQ(o.reset_after_ms, w);
        } else {
          ASSERT_EQ(o.remaining, limit - in_window);
          ASSERT_EQ(o.reset_after_ms, admitted.back().t_ms + w - r.t_ms);
        }
      }
      EXPECT_GT(admitted.size(), 100u);
    }
  }
}

TEST(AlgorithmPropertyTest, FixedWindowIsExactPerAlignedWindow) {
  for (const unsigned seed : seeds) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const std::int64_t limit = 10, w = 1'000;
    key_sim k{window(algorithm::fixed_window, limit, w), std::nullopt};
    std::map<std::int64_t, std::int64_t> per_window;  // window start -> admitted cost
    for (const auto& r : stream(seed, 5'000, 120, 4, 5'000)) {
      const std::int64_t start = r.t_ms - r.t_ms % w;
      auto& count = per_window[start];
      const auto c = static_cast<std::int64_t>(r.cost);
      const auto o = k.take(r.t_ms, r.cost);
      ASSERT_EQ(o.allowed, count + c <= limit) << "at " << r.t_ms;
      if (o.allowed) count += c;
      ASSERT_LE(count, limit);
      ASSERT_EQ(o.remaining, limit - count);
      ASSERT_EQ(o.retry_after_ms, o.allowed ? 0 : start + w - r.t_ms);
    }
    EXPECT_GT(per_window.size(), 100u);
  }
}

TEST(AlgorithmPropertyTest, SlidingWindowCounterBounds) {
  // Never more than L in an aligned window, fewer than 2L in any window of length W, and
  // each decision is Cloudflare's formula on the counts an independent tally of the
  // admitted requests gives (so windows skipped by long gaps count as empty).
  for (const std::int64_t w : {1'000, 3}) {
    for (const unsigned seed : seeds) {
      SCOPED_TRACE("seed " + std::to_string(seed) + " window " + std::to_string(w));
      const std::int64_t limit = 10;
      key_sim k{window(algorithm::sliding_window_counter, limit, w), std::nullopt};
      std::map<std::int64_t, std::int64_t> per_window;
      std::vector<request> admitted;
      std::size_t lo = 0;
      std::int64_t in_window = 0;
      std::int64_t most = 0;
      for (const auto& r : stream(seed, 5'000, w / 10 + 1, 4, 3 * w)) {
        const std::int64_t start = r.t_ms - r.t_ms % w, e = r.t_ms - start;
        const std::int64_t cur = per_window[start];
        const std::int64_t prev = per_window.contains(start - w) ? per_window[start - w] : 0;
        const auto c = static_cast<std::int64_t>(r.cost);
        const auto o = k.take(r.t_ms, r.cost);
        ASSERT_EQ(o.allowed, prev * (w - e) + (cur + c) * w <= limit * w) << "at " << r.t_ms;
        if (!o.allowed) continue;
        per_window[start] += c;
        ASSERT_LE(per_window[start], limit);
        admitted.push_back(r);
        in_window += c;
        while (admitted[lo].t_ms <= r.t_ms - w) {
          in_window -= static_cast<std::int64_t>(admitted[lo].cost);
          ++lo;
        }
        ASSERT_LT(in_window, 2 * limit) << "at " << r.t_ms;
        most = std::max(most, in_window);
      }
      EXPECT_GT(most, limit);  // it does admit more than L in some window: an approximation
    }
  }
}

TEST(AlgorithmPropertyTest, GcraDecidesAsTheTokenBucketWhenTIsExact) {
  // At 10/s, T = 100'000 us exactly: every decision is the token bucket's, field by field.
  for (const unsigned seed : seeds) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    key_sim g{bucket(algorithm::gcra, 10, 10), std::nullopt};
    key_sim b{bucket(algorithm::token_bucket, 10, 10), std::nullopt};
    std::uint64_t g_tokens = 0, b_tokens = 0;
    for (const auto& r : stream(seed, 20'000, 60, 3, 3'000)) {
      const auto og = g.take(r.t_ms, r.cost);
      const auto ob = b.take(r.t_ms, r.cost);
      ASSERT_EQ(see(og), see(ob)) << "at " << r.t_ms << " cost " << r.cost;
      g_tokens += og.allowed ? r.cost : 0;
      b_tokens += ob.allowed ? r.cost : 0;
    }
    EXPECT_EQ(g_tokens, b_tokens);
    EXPECT_GT(g_tokens, 1'000u);
  }
}

TEST(AlgorithmPropertyTest, GcraAdmitsWithinOneTokenOfTheTokenBucket) {
  // At 3/s T is rounded (333'333 us instead of 333'333.3): over a long busy stream the two
  // still admit the same tokens, within one.
  for (const unsigned seed : seeds) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    key_sim g{bucket(algorithm::gcra, 5, 3), std::nullopt};
    key_sim b{bucket(algorithm::token_bucket, 5, 3), std::nullopt};
    std::int64_t g_tokens = 0, b_tokens = 0;  // cost 1: tokens are admissions
    for (const auto& r : stream(seed, 20'000, 150, 1)) {
      g_tokens += g.take(r.t_ms, r.cost).allowed ? static_cast<std::int64_t>(r.cost) : 0;
      b_tokens += b.take(r.t_ms, r.cost).allowed ? static_cast<std::int64_t>(r.cost) : 0;
    }
    EXPECT_NEAR(static_cast<double>(g_tokens), static_cast<double>(b_tokens), 1.0);
    EXPECT_GT(b_tokens, 1'000);
  }
}

// Every algorithm with a few shapes (small and large limits, short and long windows, exact
// and rounded gcra T), each with gaps between requests short enough to deny often.
struct shape {
  policy p;
  std::int64_t max_gap_ms;
};

std::vector<shape> property_shapes() {
  return {
      {bucket(algorithm::token_bucket, 5, 3), 200},
      {bucket(algorithm::token_bucket, 1, 0.5), 1'000},
      {bucket(algorithm::gcra, 5, 3), 200},
      {bucket(algorithm::gcra, 10, 10), 100},
      {bucket(algorithm::gcra, 1, 0.7), 1'000},
      {window(algorithm::sliding_window, 10, 1'000), 100},
      {window(algorithm::sliding_window, 3, 7), 2},
      {window(algorithm::sliding_window_counter, 10, 1'000), 100},
      {window(algorithm::sliding_window_counter, 7, 333), 30},
      {window(algorithm::fixed_window, 10, 1'000), 100},
      {window(algorithm::fixed_window, 4, 30), 5},
  };
}

TEST(AlgorithmPropertyTest, RetryAfterIsExactForEveryAlgorithm) {
  // A denied request asked again exactly retry_after later is allowed; 1 ms earlier it is
  // still denied (on the state as it is: nothing else admitted in between).
  for (const auto& [p, max_gap] : property_shapes()) {
    for (const unsigned seed : {7u, 8u, 9u}) {
      SCOPED_TRACE(std::string(to_string(p.algorithm)) + " limit " + std::to_string(limit_of(p)) +
                   " seed " + std::to_string(seed));
      key_sim k{p, std::nullopt};
      int denials = 0;
      for (const auto& r : stream(seed, 3'000, max_gap, limit_of(p), 2'000)) {
        const auto o = k.take(r.t_ms, r.cost);
        if (o.allowed) {
          ASSERT_EQ(o.retry_after_ms, 0);
          continue;
        }
        ++denials;
        ASSERT_GT(o.retry_after_ms, 0);
        ASSERT_TRUE(k.would(r.t_ms + o.retry_after_ms, r.cost).allowed)
            << "at " << r.t_ms << " cost " << r.cost << " retry " << o.retry_after_ms;
        ASSERT_FALSE(k.would(r.t_ms + o.retry_after_ms - 1, r.cost).allowed)
            << "at " << r.t_ms << " cost " << r.cost << " retry " << o.retry_after_ms;
      }
      EXPECT_GT(denials, 50);
    }
  }
}

TEST(AlgorithmPropertyTest, ResetAfterIsWhenTheKeyIsFreshAgain) {
  // After an admission, reset_after later the key decides exactly as a key with no state
  // (so a backend may forget it then); 1 ms earlier it does not yet.
  for (const auto& [p, max_gap] : property_shapes()) {
    for (const unsigned seed : {7u, 8u}) {
      SCOPED_TRACE(std::string(to_string(p.algorithm)) + " limit " + std::to_string(limit_of(p)) +
                   " seed " + std::to_string(seed));
      key_sim k{p, std::nullopt};
      const key_sim fresh{p, std::nullopt};
      for (const auto& r : stream(seed, 2'000, max_gap, limit_of(p), 2'000)) {
        const auto o = k.take(r.t_ms, r.cost);
        if (!o.allowed) continue;
        ASSERT_GT(o.reset_after_ms, 0);
        const std::int64_t at = r.t_ms + o.reset_after_ms;
        for (std::uint64_t c = 1; c <= limit_of(p); ++c) {
          ASSERT_EQ(see(k.peek(at, c)), see(fresh.peek(at, c))) << "at " << r.t_ms;
          ASSERT_EQ(see(k.would(at, c)), see(fresh.would(at, c))) << "at " << r.t_ms;
        }
        ASSERT_LT(k.peek(at - 1).remaining, fresh.peek(at - 1).remaining) << "at " << r.t_ms;
      }
    }
  }
}

// ---------------------------------------------------------------------------------------
// 4. Peek, the failure modes' assumed decisions, all-or-nothing over mixed algorithms.

TEST(AlgorithmPeekTest, ReportsRemainingAsItIsAndDecidesAsDecide) {
  const std::int64_t t = 120'000;
  for (const auto a : all_algorithms) {
    SCOPED_TRACE(std::string(to_string(a)));
    key_sim k{of(a, 5), std::nullopt};
    // Fresh: everything remains, nothing to reset.
    EXPECT_EQ(see(k.peek(t, 2)), (seen{true, 5, 0, 0}));
    ASSERT_TRUE(k.take(t, 2).allowed);
    const auto allowed = k.would(t, 1);
    const auto p = k.peek(t, 1);
    EXPECT_TRUE(p.allowed);
    EXPECT_EQ(p.retry_after_ms, 0);
    EXPECT_EQ(p.remaining, 3);  // as it is, where deciding leaves 2
    EXPECT_EQ(allowed.remaining, 2);
    // A denial's peek is the denial.
    EXPECT_EQ(see(k.peek(t, 4)), see(k.would(t, 4)));
    EXPECT_FALSE(k.peek(t, 4).allowed);
  }
}

TEST(AlgorithmPeekTest, PeekingSpendsNothing) {
  for (const auto& [pol, max_gap] : property_shapes()) {
    SCOPED_TRACE(std::string(to_string(pol.algorithm)));
    key_sim peeked{pol, std::nullopt}, plain{pol, std::nullopt};
    for (const auto& r : stream(11, 2'000, max_gap, limit_of(pol))) {
      for (std::uint64_t c = 1; c <= limit_of(pol); ++c) {
        const auto p = peeked.peek(r.t_ms, c);
        const auto d = peeked.would(r.t_ms, c);
        ASSERT_EQ(p.allowed, d.allowed);
        ASSERT_EQ(p.retry_after_ms, d.retry_after_ms);
      }
      ASSERT_EQ(see(peeked.take(r.t_ms, r.cost)), see(plain.take(r.t_ms, r.cost)));
      ASSERT_EQ(peeked.state, plain.state);
    }
  }
}

TEST(AlgorithmAssumedTest, OpenIsAFreshKeyClosedIsAUsedUpOne) {
  struct row {
    policy p;
    seen open, closed;
  };
  // cost 3 each: buckets of 10 at 2/s, windows of 10 per minute.
  const row rows[] = {
      {bucket(algorithm::token_bucket, 10, 2), {true, 7, 0, 1'500}, {false, 0, 1'500, 5'000}},
      {bucket(algorithm::gcra, 10, 2), {true, 7, 0, 1'500}, {false, 0, 1'500, 5'000}},
      {window(algorithm::sliding_window, 10, 60'000),
       {true, 7, 0, 60'000},
       {false, 0, 60'000, 60'000}},
      {window(algorithm::sliding_window_counter, 10, 60'000),
       {true, 7, 0, 120'000},
       {false, 0, 60'000, 60'000}},
      {window(algorithm::fixed_window, 10, 60'000),
       {true, 7, 0, 60'000},
       {false, 0, 60'000, 60'000}},
  };
  for (const auto& r : rows) {
    const auto lp = to_limit_params(r.p, 3);
    EXPECT_EQ(see(limit_assumed(lp, true)), r.open) << to_string(r.p.algorithm);
    EXPECT_EQ(see(limit_assumed(lp, false)), r.closed) << to_string(r.p.algorithm);
  }
}

TEST(AlgorithmDecideAllTest, MixedAlgorithmsAllAllowed) {
  const std::int64_t now_us = 5'000'000;
  const policy g = bucket(algorithm::gcra, 5, 10);
  const policy sw = window(algorithm::sliding_window, 3, 1000);
  const policy fw = window(algorithm::fixed_window, 2, 1000);
  const std::vector<limit_item> items{
      {to_limit_params(g, 2), 0}, {to_limit_params(sw, 1), 1}, {to_limit_params(fw, 1), 2}};
  const std::vector<std::optional<limit_state>> prev(3);
  const auto m = limit_decide_all(items, prev, now_us);
  ASSERT_TRUE(m.allowed);
  ASSERT_EQ(m.items.size(), 3u);
  EXPECT_EQ(see(m.items[0]), (seen{true, 3, 0, 200}));
  EXPECT_EQ(see(m.items[1]), (seen{true, 2, 0, 1'000}));
  EXPECT_EQ(see(m.items[2]), (seen{true, 1, 0, 1'000}));
  ASSERT_EQ(m.next.size(), 3u);
  // What each would store alone, and its lifetime.
  for (std::size_t i = 0; i < 3; ++i) {
    std::optional<limit_state> alone;
    const auto o = limit_decide(items[i].params, alone, now_us);
    EXPECT_EQ(m.next[i], alone) << i;
    EXPECT_EQ(m.ttl_ms[i], o.reset_after_ms) << i;
  }
}

TEST(AlgorithmDecideAllTest, ADenyingWindowLeavesTheGcraKeyAsItIs) {
  const std::int64_t t = 5'000;
  key_sim g{bucket(algorithm::gcra, 5, 10), std::nullopt};
  key_sim fw{window(algorithm::fixed_window, 1, 1000), std::nullopt};
  ASSERT_TRUE(g.take(t, 2).allowed);  // 3 left
  ASSERT_TRUE(fw.take(t).allowed);    // full until 6000
  const std::vector<limit_item> items{{to_limit_params(g.pol, 1), 0},
                                      {to_limit_params(fw.pol, 1), 1}};
  const std::vector<std::optional<limit_state>> prev{g.state, fw.state};
  const auto m = limit_decide_all(items, prev, (t + 100) * us_per_ms);
  EXPECT_FALSE(m.allowed);
  // The gcra item would allow; it reports its key as it is (4 tokens by now, none spent).
  EXPECT_EQ(see(m.items[0]), (seen{true, 4, 0, 100}));
  EXPECT_EQ(see(m.items[1]), (seen{false, 0, 900, 900}));
  for (const auto& n : m.next) EXPECT_FALSE(n);
  for (const auto ttl : m.ttl_ms) EXPECT_EQ(ttl, 0);
  // Nothing to store: the gcra key still has its 4 tokens.
  EXPECT_EQ(see(g.take(t + 100, 4)), (seen{true, 0, 0, 500}));
}

TEST(AlgorithmDecideAllTest, ItemsOnOneKeySpendInSequence) {
  const std::int64_t now_us = 10'000'000;
  const policy sw = window(algorithm::sliding_window, 5, 1000);
  {
    const std::vector<limit_item> items{{to_limit_params(sw, 2), 0}, {to_limit_params(sw, 2), 0}};
    const std::vector<std::optional<limit_state>> prev(1);
    const auto m = limit_decide_all(items, prev, now_us);
    ASSERT_TRUE(m.allowed);
    EXPECT_EQ(see(m.items[0]), (seen{true, 3, 0, 1'000}));
    EXPECT_EQ(see(m.items[1]), (seen{true, 1, 0, 1'000}));
    ASSERT_TRUE(m.next[0]);
    EXPECT_EQ(m.next[0]->log, (std::vector<log_entry>{{10'000, 4}}));
  }
  {
    // 3 + 3 > 5: the second denies, so neither spends; its retry counts the first's 3.
    const std::vector<limit_item> items{{to_limit_params(sw, 3), 0}, {to_limit_params(sw, 3), 0}};
    const std::vector<std::optional<limit_state>> prev(1);
    const auto m = limit_decide_all(items, prev, now_us);
    EXPECT_FALSE(m.allowed);
    EXPECT_EQ(see(m.items[0]), (seen{true, 5, 0, 0}));
    EXPECT_EQ(see(m.items[1]), (seen{false, 5, 1'000, 0}));
    for (const auto& n : m.next) EXPECT_FALSE(n);
  }
  {
    // gcra, capacity 5 at 10/s: 3 then 3 needs one more token, 100 ms.
    const policy g = bucket(algorithm::gcra, 5, 10);
    const std::vector<limit_item> items{{to_limit_params(g, 3), 0}, {to_limit_params(g, 3), 0}};
    const std::vector<std::optional<limit_state>> prev(1);
    const auto m = limit_decide_all(items, prev, now_us);
    EXPECT_FALSE(m.allowed);
    EXPECT_EQ(see(m.items[1]), (seen{false, 5, 100, 0}));
  }
}

}  // namespace
}  // namespace sluice::detail
