// The algorithms through the memory backend and sluice::limiter on a manual clock: the same
// decisions as the pure functions of src/algorithm for the same history (every field, across
// expiry), a key that changes algorithm starts afresh, the memory bound with sliding_window
// logs (ASan runs this too), and check_all over mixed algorithms.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <sluice/sluice.hpp>

#include "algorithm/limit.hpp"

#include "support/policies.hpp"

namespace sluice {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

using sluice::test::bucket;
using sluice::test::window;

// How long a policy's state can matter, in ms: a full refill, or two windows.
std::int64_t span_ms(const policy& p) {
  if (is_window(p.algorithm)) return 2 * p.window.count();
  return static_cast<std::int64_t>(static_cast<double>(p.capacity) * 1000.0 / p.refill_per_second) +
         1;
}

// One key as the pure functions see it, never forgetting anything.
struct model {
  policy pol;
  std::optional<detail::limit_state> state;
  decision take(std::int64_t now_us, std::uint64_t cost) {
    const auto o = detail::limit_decide(detail::to_limit_params(pol, cost), state, now_us);
    return detail::to_decision(o, limit_of(pol));
  }
};

::testing::AssertionResult same(const decision& got, const decision& want) {
  if (got.allowed == want.allowed && got.limit == want.limit && got.remaining == want.remaining &&
      got.retry_after == want.retry_after && got.reset_after == want.reset_after &&
      got.degraded == want.degraded && !got.backend_error) {
    return ::testing::AssertionSuccess();
  }
  auto show = [](const decision& d) {
    return "{allowed " + std::to_string(d.allowed) + ", limit " + std::to_string(d.limit) +
           ", remaining " + std::to_string(d.remaining) + ", retry " +
           std::to_string(d.retry_after.count()) + " ms, reset " +
           std::to_string(d.reset_after.count()) + " ms, degraded " + std::to_string(d.degraded) +
           "}";
  };
  return ::testing::AssertionFailure() << "got " << show(got) << ", want " << show(want);
}

class AlgorithmMemoryTest : public ::testing::Test {
 protected:
  std::shared_ptr<manual_clock> clock_ = std::make_shared<manual_clock>();
  std::shared_ptr<backend> make(std::size_t max_keys = 1'000'000, std::size_t shards = 64) {
    return make_memory_backend({.shards = shards, .max_keys = max_keys, .time_source = clock_});
  }
  std::int64_t now_us() const { return clock_->now().count(); }
  static decision decide(backend& b, std::string_view key, const policy& p,
                         std::uint64_t cost = 1) {
    decision d;
    EXPECT_FALSE(b.decide(key, p, cost, d));
    return d;
  }
};

// Every algorithm, with exact and rounded gcra T and short and long windows.
std::vector<policy> replay_policies() {
  return {
      bucket(algorithm::token_bucket, 5, 3),
      bucket(algorithm::gcra, 5, 3),
      bucket(algorithm::gcra, 10, 10),
      window(algorithm::sliding_window, 10, 1'000),
      window(algorithm::sliding_window, 3, 7),
      window(algorithm::sliding_window_counter, 10, 1'000),
      window(algorithm::sliding_window_counter, 7, 333),
      window(algorithm::fixed_window, 10, 1'000),
      window(algorithm::fixed_window, 4, 30),
  };
}

TEST_F(AlgorithmMemoryTest, MemoryBackendDecidesAsThePureFunctions) {
  // Random streams over a few keys, the clock moving by microseconds, now and then idle for
  // longer than the state matters (the backend forgets it then; the model keeps it, and must
  // still decide the same).
  for (const auto& p : replay_policies()) {
    for (const unsigned seed : {1u, 2u, 3u}) {
      SCOPED_TRACE(std::string(to_string(p.algorithm)) + " limit " + std::to_string(limit_of(p)) +
                   " seed " + std::to_string(seed));
      auto b = make();
      std::mt19937 rng(seed);
      const std::int64_t span_us = span_ms(p) * 1000;
      std::uniform_int_distribution<std::int64_t> gap(0, span_us / 20);
      std::uniform_int_distribution<std::int64_t> long_gap(0, 2 * span_us);
      std::uniform_int_distribution<std::uint64_t> cost(1, limit_of(p));
      std::uniform_int_distribution<int> percent(0, 99);
      const std::vector<std::string> keys{"a", "b", "a-key-longer-than-the-inline-28-bytes"};
      std::map<std::string, model> models;
      for (const auto& k : keys) models.emplace(k, model{p, std::nullopt});
      int allowed = 0, denied = 0;
      for (int i = 0; i < 3'000; ++i) {
        clock_->advance(microseconds{percent(rng) < 2 ? long_gap(rng) : gap(rng)});
        const auto& k = keys[static_cast<std::size_t>(percent(rng)) % keys.size()];
        const auto c = cost(rng);
        const auto want = models.at(k).take(now_us(), c);
        ASSERT_TRUE(same(decide(*b, k, p, c), want)) << "step " << i << " key " << k;
        (want.allowed ? allowed : denied) += 1;
      }
      EXPECT_GT(allowed, 100);
      EXPECT_GT(denied, 100);
    }
  }
}

TEST_F(AlgorithmMemoryTest, CheckAllDecidesAsLimitDecideAll) {
  // The limiter's all-or-nothing call over mixed algorithms on the memory backend, against
  // limit_decide_all on the model's states: one key per algorithm, items on one key in
  // sequence.
  auto mem = make();
  limiter lim(mem, mem, clock_);
  const std::vector<std::pair<std::string, policy>> choices{
      {"tb", bucket(algorithm::token_bucket, 6, 4)},
      {"gcra", bucket(algorithm::gcra, 6, 4)},
      {"sw", window(algorithm::sliding_window, 6, 1'500)},
      {"swc", window(algorithm::sliding_window_counter, 6, 1'500)},
      {"fw", window(algorithm::fixed_window, 6, 1'500)},
  };
  std::map<std::string, std::optional<detail::limit_state>> states;
  std::mt19937 rng(99);
  std::uniform_int_distribution<std::int64_t> gap(0, 150'000);
  std::uniform_int_distribution<std::size_t> pick(0, choices.size() - 1);
  std::uniform_int_distribution<std::size_t> count(2, 4);
  std::uniform_int_distribution<std::uint64_t> cost(1, 3);
  int all = 0, not_all = 0;
  for (int i = 0; i < 3'000; ++i) {
    clock_->advance(microseconds{gap(rng)});
    std::vector<check_item> items;
    std::vector<std::string> item_keys;
    const std::size_t n = count(rng);
    for (std::size_t j = 0; j < n; ++j) {
      const auto& [key, pol] = choices[pick(rng)];
      items.push_back({key, pol, cost(rng)});
      item_keys.push_back(key);
    }
    // The model: one state per distinct key, in order of first appearance.
    std::vector<std::string> distinct;
    std::vector<detail::limit_item> math;
    for (std::size_t j = 0; j < n; ++j) {
      std::size_t s = 0;
      while (s < distinct.size() && distinct[s] != item_keys[j]) ++s;
      if (s == distinct.size()) distinct.push_back(item_keys[j]);
      math.push_back({detail::to_limit_params(items[j].policy, items[j].cost), s});
    }
    std::vector<std::optional<detail::limit_state>> prev;
    for (const auto& k : distinct) prev.push_back(states[k]);
    const auto m = detail::limit_decide_all(math, prev, now_us());
    if (m.allowed) {
      for (std::size_t s = 0; s < distinct.size(); ++s) {
        if (m.next[s]) states[distinct[s]] = m.next[s];
      }
    }
    std::error_code ec;
    const auto ds = lim.check_all(items, ec);
    ASSERT_FALSE(ec);
    ASSERT_EQ(ds.size(), n);
    for (std::size_t j = 0; j < n; ++j) {
      ASSERT_TRUE(same(ds[j], detail::to_decision(m.items[j], limit_of(items[j].policy))))
          << "step " << i << " item " << j << " " << item_keys[j];
    }
    ASSERT_EQ(all_allowed(ds), m.allowed);
    (m.allowed ? all : not_all) += 1;
  }
  EXPECT_GT(all, 100);
  EXPECT_GT(not_all, 100);
}

TEST_F(AlgorithmMemoryTest, AKeySwitchedToAnotherAlgorithmStartsAfresh) {
  auto b = make();
  const auto fw = window(algorithm::fixed_window, 2, 60'000);
  const auto sw = window(algorithm::sliding_window, 2, 60'000);
  const auto swc = window(algorithm::sliding_window_counter, 2, 60'000);
  const auto g = bucket(algorithm::gcra, 2, 0.01);
  const auto tb = bucket(algorithm::token_bucket, 2, 0.01);
  for (const auto& p : {fw, sw, swc, g, tb}) {
    SCOPED_TRACE(std::string(to_string(p.algorithm)));
    EXPECT_TRUE(decide(*b, "k", p, 2).allowed);
    EXPECT_FALSE(decide(*b, "k", p).allowed);
  }
  // Each algorithm's own state was dropped when another one wrote the key: nothing of the
  // first round counts, in either order.
  for (const auto& p : {sw, tb, g, fw, sw, swc, sw}) {
    SCOPED_TRACE(std::string(to_string(p.algorithm)));
    const auto d = decide(*b, "k", p);
    EXPECT_TRUE(d.allowed);
    EXPECT_EQ(d.remaining, 1u);
    EXPECT_EQ(d.limit, 2u);
  }
  // Through check_all too (the generic path for every algorithm, the token bucket included).
  limiter lim(b, b, clock_);
  for (const auto& p : {tb, sw, g, sw}) {
    SCOPED_TRACE(std::string(to_string(p.algorithm)));
    const auto ds = lim.check_all(std::vector<check_item>{
        {"k", p, 1}, {"other", window(algorithm::fixed_window, 100, 1'000), 1}});
    ASSERT_EQ(ds.size(), 2u);
    EXPECT_TRUE(ds[0].allowed);
    EXPECT_EQ(ds[0].remaining, 1u);
  }
}

TEST_F(AlgorithmMemoryTest, MemoryBoundForgetsASlidingWindowLog) {
  // One key at most: the second key pushes the first out, log and all (ASan checks the
  // log is freed), and the first starts afresh.
  auto b = make(1);
  const auto sw = window(algorithm::sliding_window, 1, 60'000);
  EXPECT_TRUE(decide(*b, "a", sw).allowed);
  EXPECT_FALSE(decide(*b, "a", sw).allowed);
  EXPECT_TRUE(decide(*b, "b", sw).allowed);
  EXPECT_TRUE(decide(*b, "a", sw).allowed);
  EXPECT_FALSE(decide(*b, "a", sw).allowed);
}

TEST_F(AlgorithmMemoryTest, ManySlidingWindowKeysUnderASmallBound) {
  // max_keys 16 (one shard), 300 keys (a third too long to be kept inline). In each phase 12
  // keys, mostly sliding_window, are exact against the model: the earlier phases' keys have
  // expired (the clock jumps past every state's span between phases) and make room. Then
  // 200 keys at once, far over the bound: keys are forgotten, decisions stay sane, and
  // nothing leaks or is used after being freed (the asan stage runs this).
  auto b = make(16);
  std::mt19937 rng(7);
  std::vector<std::string> universe;
  for (int i = 0; i < 300; ++i) {
    universe.push_back(i % 3 == 0 ? "tenant/with/a/long/prefix/user:" + std::to_string(i)
                                  : "u" + std::to_string(i));
  }
  const std::vector<policy> kinds{
      window(algorithm::sliding_window, 50, 1'000),
      window(algorithm::sliding_window, 20, 300),
      window(algorithm::sliding_window, 50, 1'000),
      bucket(algorithm::gcra, 20, 40),
      window(algorithm::fixed_window, 20, 500),
      window(algorithm::sliding_window_counter, 20, 500),
      bucket(algorithm::token_bucket, 20, 40),
  };
  std::uniform_int_distribution<std::size_t> any_key(0, universe.size() - 1);
  std::uniform_int_distribution<std::size_t> any_kind(0, kinds.size() - 1);
  std::uniform_int_distribution<std::int64_t> gap(0, 20'000);
  std::uniform_int_distribution<std::uint64_t> cost(1, 3);
  for (int phase = 0; phase < 30; ++phase) {
    SCOPED_TRACE("phase " + std::to_string(phase));
    std::map<std::string, model> live;
    while (live.size() < 12) {
      const auto& k = universe[any_key(rng)];
      live.emplace(k, model{kinds[any_kind(rng)], std::nullopt});
    }
    std::vector<std::string> names;
    for (const auto& [k, m] : live) names.push_back(k);
    std::uniform_int_distribution<std::size_t> pick(0, names.size() - 1);
    for (int i = 0; i < 200; ++i) {
      clock_->advance(microseconds{gap(rng)});
      const auto& k = names[pick(rng)];
      auto& m = live.at(k);
      const auto c = cost(rng);
      const auto want = m.take(now_us(), c);
      ASSERT_TRUE(same(decide(*b, k, m.pol, c), want)) << "step " << i << " key " << k;
    }
    clock_->advance(milliseconds{5'000});
  }
  const auto sw = window(algorithm::sliding_window, 5, 1'000);
  for (int i = 0; i < 5'000; ++i) {
    clock_->advance(microseconds{gap(rng) / 10});
    const auto& k = universe[any_key(rng) % 200];
    // Now and then another algorithm takes a key over (and frees its log).
    const auto& p = i % 17 == 0 ? kinds[any_kind(rng)] : sw;
    const auto c = cost(rng);
    const auto d = decide(*b, k, p, c);
    ASSERT_EQ(d.limit, limit_of(p));
    ASSERT_LE(d.remaining, limit_of(p) - (d.allowed ? c : 0));
    ASSERT_EQ(d.retry_after > milliseconds{0}, !d.allowed);
    ASSERT_LE(d.reset_after.count(), span_ms(p));
  }
  b.reset();  // frees every log still held
}

TEST_F(AlgorithmMemoryTest, CheckAllRefusesTwoAlgorithmsOnOneKey) {
  auto mem = make();
  limiter lim(mem, mem, clock_);
  const auto fw = window(algorithm::fixed_window, 1, 60'000);
  const auto sw = window(algorithm::sliding_window, 1, 60'000);
  const auto g = bucket(algorithm::gcra, 1, 1);
  const auto tb = bucket(algorithm::token_bucket, 1, 1);
  for (const auto& [p, q] : {std::pair{fw, sw}, std::pair{g, tb}, std::pair{sw, g}}) {
    std::error_code ec;
    const auto ds =
        lim.check_all(std::vector<check_item>{{"other", fw, 1}, {"k", p, 1}, {"k", q, 1}}, ec);
    EXPECT_EQ(ec, errc::mismatched_parameters);
    EXPECT_TRUE(is_invalid_input(ec));
    EXPECT_TRUE(ds.empty());
    EXPECT_THROW(lim.check_all(std::vector<check_item>{{"k", p, 1}, {"k", q, 1}}),
                 std::system_error);
  }
  // Nothing was decided: every key is still fresh.
  EXPECT_TRUE(lim.check("other", fw).allowed);
  EXPECT_TRUE(lim.check("k", sw).allowed);
  // One algorithm on one key is fine, even with other parameters.
  std::error_code ec;
  const auto ds =
      lim.check_all(std::vector<check_item>{{"j", window(algorithm::fixed_window, 3, 1'000), 1},
                                            {"j", window(algorithm::fixed_window, 5, 1'000), 1}},
                    ec);
  EXPECT_FALSE(ec);
  EXPECT_TRUE(all_allowed(ds));
  EXPECT_EQ(lim.stats().invalid, 6u);
}

TEST_F(AlgorithmMemoryTest, CheckAllWithADenyingWindowSpendsNothingFromGcra) {
  auto mem = make();
  limiter lim(mem, mem, clock_);
  const auto g = bucket(algorithm::gcra, 5, 0.01);  // no refill to speak of
  const auto fw = window(algorithm::fixed_window, 1, 3'600'000);
  ASSERT_TRUE(lim.check("w", fw).allowed);  // the window is full now
  for (int i = 0; i < 3; ++i) {
    const auto ds = lim.check_all(std::vector<check_item>{{"g", g, 2}, {"w", fw, 1}});
    ASSERT_EQ(ds.size(), 2u);
    EXPECT_TRUE(ds[0].allowed);
    EXPECT_EQ(ds[0].remaining, 5u);  // as it is: nothing spent
    EXPECT_FALSE(ds[1].allowed);
    EXPECT_FALSE(all_allowed(ds));
  }
  EXPECT_TRUE(lim.check("g", g, 5).allowed);  // all 5 tokens still there
}

TEST_F(AlgorithmMemoryTest, LimiterValidatesWindowsAndReportsTheirLimit) {
  auto mem = make();
  limiter lim(mem, mem, clock_);
  const auto fw = window(algorithm::fixed_window, 3, 1'000);
  std::error_code ec;
  lim.check("k", fw, 4, ec);
  EXPECT_EQ(ec, errc::cost_exceeds_capacity);
  auto bad = fw;
  bad.capacity = 3;
  lim.check("k", bad, 1, ec);
  EXPECT_EQ(ec, errc::mismatched_parameters);
  const auto d = lim.check("k", fw, 3, ec);
  EXPECT_FALSE(ec);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.limit, 3u);
  EXPECT_EQ(d.remaining, 0u);
  EXPECT_FALSE(d.degraded);
}

}  // namespace
}  // namespace sluice
