// lua/prelude.lua's algorithms and src/algorithm/*.cpp are the same math: random
// histories (costs, time steps, the clock going backwards, policies and algorithms
// changing) are replayed through the scripts with the test-only "now" argument and through
// limit_decide / limit_decide_all with the same now; every reply field, the stored value
// and the key's expiry must match.
#include <algorithm>
#include <cstdio>
#include <limits>
#include <random>

#include <gtest/gtest.h>

#include <sluice/error.hpp>

#include "algorithm/lease.hpp"
#include "algorithm/limit.hpp"
#include "algorithm/slots.hpp"
#include "algorithm/token_bucket.hpp"
#include "redis/decide_command.hpp"
#include "redis/scripts.hpp"
#include "support/redis_client.hpp"
#include "support/redis_server.hpp"
#include "support/test_seed.hpp"

#include "support/policies.hpp"

namespace {

using namespace sluice;
using std::chrono::milliseconds;

using sluice::test::bucket;
using sluice::test::window;

// Extremes included: the slowest rate, the largest capacity, rates that divide badly,
// windows from 1 ms to a day.
const std::vector<policy>& policies() {
  static const std::vector<policy> all = [] {
    std::vector<policy> v;
    for (auto [cap, rate] :
         std::initializer_list<std::pair<std::uint64_t, double>>{{1, 0.001},
                                                                 {3, 0.007},
                                                                 {10, 1},
                                                                 {10, 0.333},
                                                                 {100, 123.457},
                                                                 {5, 1000},
                                                                 {2, 999.999},
                                                                 {1'000'000'000, 0.001},
                                                                 {1'000'000'000, 1e9},
                                                                 {50, 0.002}})
      v.push_back(bucket(algorithm::token_bucket, cap, rate));
    for (auto [cap, rate] : std::initializer_list<std::pair<std::uint64_t, double>>{
             {1, 0.5}, {3, 7}, {10, 1}, {10, 333}, {100, 1000}, {5, 1e6}, {1000, 0.001}})
      v.push_back(bucket(algorithm::gcra, cap, rate));
    for (auto a :
         {algorithm::fixed_window, algorithm::sliding_window_counter, algorithm::sliding_window}) {
      for (auto [limit, w] : std::initializer_list<std::pair<std::uint64_t, std::int64_t>>{
               {1, 1}, {2, 7}, {5, 1000}, {10, 60'000}, {100, 3'000}, {3, 86'400'000}})
        v.push_back(window(a, limit, w));
    }
    for (const auto& p : v) {
      if (validate(p)) throw std::logic_error("invalid test policy");
    }
    return v;
  }();
  return all;
}

std::int64_t random_step(std::mt19937_64& rng) {
  switch (std::uniform_int_distribution<int>(0, 9)(rng)) {
    case 0:
      return 0;  // same ms
    case 1:
      return -std::uniform_int_distribution<std::int64_t>(1, 5000)(rng);  // backwards
    case 2:
      return std::uniform_int_distribution<std::int64_t>(10'000, 100'000'000)(rng);
    default:
      return std::uniform_int_distribution<std::int64_t>(1, 2000)(rng);
  }
}

const policy& random_policy(std::mt19937_64& rng) { return policies()[rng() % policies().size()]; }

// A cost of 1..3, or the whole limit one time in `full_one_in`.
detail::limit_params random_params(std::mt19937_64& rng, const policy& p, unsigned full_one_in) {
  const auto most = static_cast<std::int64_t>(limit_of(p));
  const std::int64_t cost = rng() % full_one_in == 0 ? most
                                                     : std::uniform_int_distribution<std::int64_t>(
                                                           1, std::min<std::int64_t>(most, 3))(rng);
  return detail::to_limit_params(p, static_cast<std::uint64_t>(cost));
}

// A key's state as the C++ side tracks it: the state and the algorithm that wrote it.
// Redis reads another algorithm's state as no state, so the C++ side must too.
struct tracked {
  std::optional<detail::limit_state> state;
  algorithm algo = algorithm::token_bucket;
  std::optional<detail::limit_state> for_algo(algorithm a) const {
    // A block holds whatever the algorithm.
    if (state && state->blocked_until_us != 0) return state;
    return algo == a ? state : std::nullopt;
  }
};

// The stored value lua/prelude.lua writes for a state.
std::string stored_form(algorithm a, const detail::limit_state& s) {
  const auto n = [](std::int64_t v) { return std::to_string(v); };
  if (s.blocked_until_us != 0) return "b" + n(s.blocked_until_us);
  switch (a) {
    case algorithm::token_bucket:
      return n(s.x) + " " + n(s.y);
    case algorithm::gcra:
      return n(s.x);
    case algorithm::fixed_window:
      return "f" + n(s.x) + " " + n(s.y);
    case algorithm::sliding_window_counter:
      return "c" + n(s.x) + " " + n(s.y) + " " + n(s.z);
    case algorithm::sliding_window: {
      std::string out = "w";
      for (std::size_t i = 0; i < s.log.size(); ++i)
        out += (i ? " " : "") + n(s.log[i].ts_ms) + " " + n(s.log[i].n);
      return out;
    }
  }
  return {};
}

// The key's PX after a write: reset_after, one more ms for gcra (lua/prelude.lua).
std::int64_t expected_px(algorithm a, std::int64_t reset_ms) {
  return reset_ms + (a == algorithm::gcra ? 1 : 0);
}

// Every field a caller sees.
void expect_same_outcome(const detail::limit_outcome& lua, const detail::limit_outcome& cpp) {
  ASSERT_EQ(lua.allowed, cpp.allowed);
  ASSERT_EQ(lua.remaining, cpp.remaining);
  ASSERT_EQ(lua.retry_after_ms, cpp.retry_after_ms);
  ASSERT_EQ(lua.reset_after_ms, cpp.reset_after_ms);
}

// A few keys, each with its own policy, for the multi-key scripts; the policies drift.
struct key_pool {
  static constexpr std::size_t size = 3;
  std::vector<std::string> names;
  std::vector<tracked> keys = std::vector<tracked>(size);
  std::vector<policy> policy_of = std::vector<policy>(size);

  key_pool(const std::string& prefix, int history, std::mt19937_64& rng) {
    for (std::size_t k = 0; k < size; ++k) {
      names.push_back(prefix + std::to_string(history) + ":" + std::to_string(k));
      policy_of[k] = random_policy(rng);
    }
  }
  void drift(std::mt19937_64& rng) {
    for (auto& p : policy_of) {
      if (rng() % 20 == 0) p = random_policy(rng);
    }
  }
  // After a script call: each key's expiry, then PERSIST (the history runs on its own clock
  // while Redis expires in real time), then its value; 3 replies per key.
  void append_probes(std::string& cmds) const {
    for (const auto& name : names) {
      redis::append_command(cmds, {"PTTL", name});
      redis::append_command(cmds, {"PERSIST", name});
      redis::append_command(cmds, {"GET", name});
    }
  }
};

TEST(RedisScriptTest, LuaMatchesCppOnRandomHistories) {
  test::redis_server redis;
  test::redis_client c(redis.port());
  const std::uint64_t seed = test::test_seed(20261207);
  SCOPED_TRACE(test::seed_trace(seed));
  std::mt19937_64 rng(seed);
  int steps = 0, allowed = 0, denied = 0, ops = 0;
  for (int history = 0; history < 100; ++history) {
    const std::string key = "history:" + std::to_string(history);
    tracked t;
    std::int64_t now = 1'700'000'000'000 + std::uniform_int_distribution<std::int64_t>(0, 1e9)(rng);
    policy pol = random_policy(rng);
    for (int step = 0; step < 150; ++step, ++steps) {
      SCOPED_TRACE("seed " + std::to_string(seed) + " history " + std::to_string(history) +
                   " step " + std::to_string(step) + " " + std::string(to_string(pol.algorithm)));
      now += random_step(rng);
      if (rng() % 20 == 0) pol = random_policy(rng);  // the policy changed
      auto p = random_params(rng, pol, 4);
      // One step in five is a key operation, on the same key.
      if (rng() % 5 == 0) {
        const auto op = static_cast<key_operation>(1 + rng() % 5);
        const std::uint64_t amount =
            op == key_operation::block ? 1 + rng() % 3000 : 1 + rng() % limit_of(pol);
        p = detail::to_limit_params(pol, op, amount);
        ++ops;
      }

      SCOPED_TRACE("op " + std::to_string(static_cast<int>(p.op)) + " cost " +
                   std::to_string(p.cost) + " stored " +
                   (t.state ? stored_form(t.algo, *t.state) : std::string("none")));
      auto next = t.for_algo(p.algo);
      const auto applied = detail::limit_apply(p, next, now * 1000);
      const auto& cpp = applied.outcome;
      // The script, then the key's expiry and value, with nothing in between. Redis expires
      // keys in real time while the history runs on its own clock, so PERSIST keeps the
      // state for the next step (a 1 ms expiry cannot pass inside one transaction).
      std::string cmds;
      redis::append_decide_command(cmds, redis::script_call::eval, key, p, now);
      redis::append_command(cmds, {"PTTL", key});
      redis::append_command(cmds, {"PERSIST", key});
      redis::append_command(cmds, {"GET", key});
      const auto replies = c.transaction(cmds, 4);
      detail::limit_outcome lua;
      ASSERT_EQ(redis::parse_decide_reply(*replies->element[0], lua), redis::script_reply::decided)
          << redis::reply_text(*replies->element[0]);
      ASSERT_NO_FATAL_FAILURE(expect_same_outcome(lua, cpp));
      const long long ttl = replies->element[1]->integer;
      const redisReply& stored = *replies->element[3];
      (cpp.allowed ? allowed : denied) += 1;
      if (applied.write) {
        t = {std::move(next), p.algo};
        // The key lives until its state stops mattering: then it may vanish.
        if (t.state) {
          const auto px =
              t.state->blocked_until_us != 0 ? applied.ttl_ms : expected_px(p.algo, applied.ttl_ms);
          ASSERT_LE(ttl, px);
          ASSERT_GE(ttl, px - 1000);
        }
      }
      if (t.state) {
        ASSERT_EQ(redis::reply_text(stored), stored_form(t.algo, *t.state));
      } else {
        ASSERT_EQ(stored.type, REDIS_REPLY_NIL);
      }
    }
  }
  std::printf("%d steps: %d allowed, %d denied, %d key operations\n", steps, allowed, denied, ops);
  EXPECT_GT(allowed, steps / 10);
  EXPECT_GT(denied, steps / 10);
  EXPECT_GT(ops, steps / 10);
}

// lua/decide_multi.lua against limit_decide_all: calls of 2..5 items over a pool of 3 keys
// (so keys repeat within a call), each key with its own, changing policy and algorithm.
TEST(RedisScriptTest, MultiLuaMatchesCppOnRandomHistories) {
  test::redis_server redis;
  test::redis_client c(redis.port());
  const std::uint64_t seed = test::test_seed(20261208);
  SCOPED_TRACE(test::seed_trace(seed));
  std::mt19937_64 rng(seed);
  int steps = 0, committed = 0, refused = 0, repeated = 0, mixed = 0;
  for (int history = 0; history < 40; ++history) {
    key_pool kp("multi:", history, rng);
    constexpr std::size_t pool = key_pool::size;
    std::int64_t now = 1'700'000'000'000 + std::uniform_int_distribution<std::int64_t>(0, 1e9)(rng);
    for (int step = 0; step < 100; ++step, ++steps) {
      SCOPED_TRACE("seed " + std::to_string(seed) + " history " + std::to_string(history) +
                   " step " + std::to_string(step));
      now += random_step(rng);
      kp.drift(rng);
      const std::size_t n = 2 + rng() % 4;
      std::vector<detail::limit_item> items;
      std::vector<redis::multi_key> keys;
      std::vector<bool> seen(pool, false);
      bool dup = false;
      for (std::size_t i = 0; i < n; ++i) {
        const std::size_t k = rng() % pool;
        dup = dup || seen[k];
        seen[k] = true;
        const auto p = random_params(rng, kp.policy_of[k], 5);
        items.push_back({p, k});
        keys.push_back({kp.names[k], p});
      }
      repeated += dup ? 1 : 0;
      mixed += items.front().params.algo != items.back().params.algo ? 1 : 0;
      std::vector<std::optional<detail::limit_state>> prev(pool);
      for (std::size_t k = 0; k < pool; ++k)
        prev[k] = kp.keys[k].for_algo(kp.policy_of[k].algorithm);
      auto cpp = detail::limit_decide_all(items, prev, now * 1000);

      std::string cmds;
      redis::append_decide_multi_command(cmds, redis::script_call::eval, keys, now);
      kp.append_probes(cmds);
      const auto replies = c.transaction(cmds, 1 + 3 * pool);
      std::vector<detail::limit_outcome> lua;
      ASSERT_EQ(redis::parse_decide_multi_reply(*replies->element[0], n, lua),
                redis::script_reply::decided)
          << redis::reply_text(*replies->element[0]);
      for (std::size_t i = 0; i < n; ++i) {
        SCOPED_TRACE("item " + std::to_string(i));
        ASSERT_NO_FATAL_FAILURE(expect_same_outcome(lua[i], cpp.items[i]));
      }
      if (cpp.allowed) {
        ++committed;
        for (std::size_t k = 0; k < pool; ++k) {
          if (cpp.next[k]) kp.keys[k] = {std::move(cpp.next[k]), kp.policy_of[k].algorithm};
        }
      } else {
        ++refused;
      }
      // Written exactly when all allowed; otherwise every key is as it was.
      for (std::size_t k = 0; k < pool; ++k) {
        SCOPED_TRACE("key " + std::to_string(k));
        const redisReply& stored = *replies->element[1 + 3 * k + 2];
        const auto& t = kp.keys[k];
        if (!t.state) {
          ASSERT_EQ(stored.type, REDIS_REPLY_NIL);
          continue;
        }
        ASSERT_EQ(redis::reply_text(stored), stored_form(t.algo, *t.state));
        if (cpp.allowed && seen[k]) {
          const long long ttl = replies->element[1 + 3 * k]->integer;
          ASSERT_LE(ttl, expected_px(t.algo, cpp.ttl_ms[k]));
          ASSERT_GE(ttl, expected_px(t.algo, cpp.ttl_ms[k]) - 1000);
        }
      }
    }
  }
  std::printf("%d calls: %d committed, %d refused, %d with a repeated key, %d mixing\n", steps,
              committed, refused, repeated, mixed);
  EXPECT_GT(committed, steps / 10);
  EXPECT_GT(refused, steps / 10);
  EXPECT_GT(repeated, steps / 10);
  EXPECT_GT(mixed, steps / 10);
}

// lua/decide_batch.lua against limit_decide item by item: a batch is n independent
// decisions in order, so a repeated key sees what its earlier item wrote, and a denial
// writes nothing. Calls of 1..8 items over a pool of 3 keys, policies changing.
TEST(RedisScriptTest, BatchLuaMatchesCppOnRandomHistories) {
  test::redis_server redis;
  test::redis_client c(redis.port());
  const std::uint64_t seed = test::test_seed(20261209);
  SCOPED_TRACE(test::seed_trace(seed));
  std::mt19937_64 rng(seed);
  int calls = 0, allowed = 0, denied = 0, repeated = 0;
  for (int history = 0; history < 40; ++history) {
    key_pool kp("batch:", history, rng);
    constexpr std::size_t pool = key_pool::size;
    std::int64_t now = 1'700'000'000'000 + std::uniform_int_distribution<std::int64_t>(0, 1e9)(rng);
    for (int step = 0; step < 80; ++step, ++calls) {
      SCOPED_TRACE("seed " + std::to_string(seed) + " history " + std::to_string(history) +
                   " step " + std::to_string(step));
      now += random_step(rng);
      kp.drift(rng);
      const std::size_t n = 1 + rng() % 8;
      std::vector<redis::multi_key> keys;
      std::vector<detail::limit_outcome> cpp;
      std::vector<std::optional<std::int64_t>> ttl(pool);  // of the key's last write
      std::vector<bool> seen(pool, false);
      bool dup = false;
      for (std::size_t i = 0; i < n; ++i) {
        const std::size_t k = rng() % pool;
        dup = dup || seen[k];
        seen[k] = true;
        // Within a batch a key may even change algorithm: each item decides on its own.
        const policy& pol = rng() % 8 == 0 ? random_policy(rng) : kp.policy_of[k];
        auto p = random_params(rng, pol, 4);
        if (rng() % 6 == 0) {  // a key operation, carried by the batch like a check
          const auto op = static_cast<key_operation>(1 + rng() % 5);
          p = detail::to_limit_params(
              pol, op, op == key_operation::block ? 1 + rng() % 3000 : 1 + rng() % limit_of(pol));
        }
        keys.push_back({kp.names[k], p});
        auto next = kp.keys[k].for_algo(p.algo);
        const auto applied = detail::limit_apply(p, next, now * 1000);
        cpp.push_back(applied.outcome);
        if (applied.write) {
          kp.keys[k] = {std::move(next), p.algo};
          ttl[k].reset();
          if (kp.keys[k].state) {
            ttl[k] = kp.keys[k].state->blocked_until_us != 0 ? applied.ttl_ms
                                                             : expected_px(p.algo, applied.ttl_ms);
          }
        }
      }
      repeated += dup ? 1 : 0;

      std::string cmds;
      redis::append_decide_batch_command(cmds, redis::script_call::eval, keys, now);
      kp.append_probes(cmds);
      const auto replies = c.transaction(cmds, 1 + 3 * pool);
      std::vector<redis::batch_item> lua;
      ASSERT_EQ(redis::parse_decide_batch_reply(*replies->element[0], n, lua),
                redis::script_reply::decided)
          << redis::reply_text(*replies->element[0]);
      for (std::size_t i = 0; i < n; ++i) {
        SCOPED_TRACE("item " + std::to_string(i));
        ASSERT_FALSE(lua[i].ec) << lua[i].ec.message();
        ASSERT_NO_FATAL_FAILURE(expect_same_outcome(lua[i].outcome, cpp[i]));
        (cpp[i].allowed ? allowed : denied) += 1;
      }
      for (std::size_t k = 0; k < pool; ++k) {
        SCOPED_TRACE("key " + std::to_string(k));
        const redisReply& stored = *replies->element[1 + 3 * k + 2];
        const auto& t = kp.keys[k];
        if (!t.state) {
          ASSERT_EQ(stored.type, REDIS_REPLY_NIL);
          continue;
        }
        ASSERT_EQ(redis::reply_text(stored), stored_form(t.algo, *t.state));
        if (ttl[k]) {
          const long long got = replies->element[1 + 3 * k]->integer;
          ASSERT_LE(got, *ttl[k]);
          ASSERT_GE(got, *ttl[k] - 1000);
        }
      }
    }
  }
  std::printf("%d calls: %d allowed, %d denied, %d with a repeated key\n", calls, allowed, denied,
              repeated);
  EXPECT_GT(allowed, calls / 4);
  EXPECT_GT(denied, calls / 4);
  EXPECT_GT(repeated, calls / 4);
}

// A key that holds no Sluice state fails its own item of a batch, never its neighbours':
// they are decided and written as if the bad key were not there.
TEST(RedisScriptTest, BatchItemOnABadKeyFailsAlone) {
  test::redis_server redis;
  test::redis_client c(redis.port());
  c.command({"SET", "garbage", "not a state"});
  c.command({"HSET", "hash", "f", "v"});  // GET on it is WRONGTYPE
  const detail::limit_params p{algorithm::token_bucket, 10'000'000, 1000, 1'000'000};
  const detail::limit_params q{algorithm::token_bucket, 5'000'000, 1000, 2'000'000};
  // "hash" reads like a missing key to the script's MGET; twice, and between items of
  // other parameters, so that the script's runs of parameters are crossed too.
  // A cost above the capacity (which the limiter refuses before Redis) denies a missing
  // key without a write, so the script has to tell the hash apart another way.
  const detail::limit_params over{algorithm::token_bucket, 1'000'000, 1000, 2'000'000};
  const std::vector<redis::multi_key> keys{{"good", p},    {"garbage", p},   {"hash", p},
                                           {"fresh", q},   {"hash", q},      {"good", p},
                                           {"hash", over}, {"missing", over}};
  std::string cmd;
  redis::append_decide_batch_command(cmd, redis::script_call::eval, keys, 5000);
  const auto replies = c.transaction(cmd, 1);
  std::vector<redis::batch_item> items;
  ASSERT_EQ(redis::parse_decide_batch_reply(*replies->element[0], keys.size(), items),
            redis::script_reply::decided)
      << redis::reply_text(*replies->element[0]);
  EXPECT_FALSE(items[0].ec);
  EXPECT_EQ(items[0].outcome.remaining, 9);
  EXPECT_EQ(items[1].ec, errc::backend_script_error);
  EXPECT_EQ(items[2].ec, errc::backend_script_error);
  EXPECT_FALSE(items[3].ec);
  EXPECT_EQ(items[3].outcome.remaining, 3);
  EXPECT_EQ(items[4].ec, errc::backend_script_error);
  EXPECT_FALSE(items[5].ec);
  EXPECT_EQ(items[5].outcome.remaining, 8);
  EXPECT_EQ(items[6].ec, errc::backend_script_error);
  EXPECT_FALSE(items[7].ec);
  EXPECT_FALSE(items[7].outcome.allowed);
  EXPECT_EQ(redis::reply_text(*c.command({"TYPE", "missing"})), "none");
  EXPECT_EQ(redis::reply_text(*c.command({"GET", "good"})), "8000000 5000");
  EXPECT_EQ(redis::reply_text(*c.command({"GET", "fresh"})), "3000000 5000");
  EXPECT_EQ(redis::reply_text(*c.command({"GET", "garbage"})), "not a state");
  EXPECT_EQ(redis::reply_text(*c.command({"TYPE", "hash"})), "hash");
  EXPECT_EQ(redis::reply_text(*c.command({"HGET", "hash", "f"})), "v");
}

TEST(RedisScriptTest, MalformedStateIsAScriptError) {
  test::redis_server redis;
  test::redis_client c(redis.port());
  c.command({"SET", "bad", "garbage"});
  for (auto a : {algorithm::token_bucket, algorithm::gcra, algorithm::sliding_window,
                 algorithm::sliding_window_counter, algorithm::fixed_window}) {
    SCOPED_TRACE(std::string(to_string(a)));
    EXPECT_THROW(c.eval_decide("bad", {a, 10, 1000, 1}, 1000), std::runtime_error);
  }
}

// The single-key and batch scripts read a stored value the same way (lua/prelude.lua): a
// value is a state both decide and write alike, or one both refuse with the same error,
// leaving it as it was.
TEST(RedisScriptTest, SingleAndBatchScriptsAgreeOnEveryStoredValue) {
  test::redis_server redis;
  test::redis_client c(redis.port());
  const std::vector<std::string> values{"5000000 900",
                                        "0 1000",
                                        "99999999999 0",
                                        "3000000 2000",
                                        "10000000 1000",
                                        "garbage",
                                        "1",
                                        "x y",
                                        "5 ",
                                        " 5",
                                        "5 x",
                                        "1e6 900",
                                        "0x10 900",
                                        "-1 900",
                                        "5000000 900 7",
                                        "",
                                        "nan 900",
                                        "5000000  900"};
  const detail::limit_params p{algorithm::token_bucket, 10'000'000, 1000, 1'000'000};
  int decided = 0, refused = 0;
  for (const auto& v : values) {
    SCOPED_TRACE("stored \"" + v + "\"");
    c.command({"SET", "single", v});
    c.command({"SET", "batch", v});
    std::string cmds;
    redis::append_decide_command(cmds, redis::script_call::eval, "single", p, 1000);
    const std::vector<redis::multi_key> keys{{"batch", p}};
    redis::append_decide_batch_command(cmds, redis::script_call::eval, keys, 1000);
    const auto replies = c.transaction(cmds, 2);
    const redisReply& one = *replies->element[0];
    const redisReply& batch = *replies->element[1];
    ASSERT_EQ(batch.type, REDIS_REPLY_ARRAY) << redis::reply_text(batch);
    ASSERT_EQ(batch.elements, 4u);
    const redisReply& item = *batch.element[0];
    if (one.type == REDIS_REPLY_ERROR) {
      ++refused;
      ASSERT_EQ(item.type, REDIS_REPLY_ERROR) << "the batch decided what the single script refused";
      EXPECT_NE(redis::reply_text(one).find("sluice: malformed bucket state"), std::string::npos)
          << redis::reply_text(one);
      EXPECT_EQ(redis::reply_text(item), "sluice: malformed bucket state");
    } else {
      ++decided;
      ASSERT_NE(item.type, REDIS_REPLY_ERROR) << redis::reply_text(item);
      detail::limit_outcome single_outcome;
      ASSERT_EQ(redis::parse_decide_reply(one, single_outcome), redis::script_reply::decided);
      std::vector<redis::batch_item> items;
      ASSERT_EQ(redis::parse_decide_batch_reply(batch, 1, items), redis::script_reply::decided);
      ASSERT_FALSE(items[0].ec);
      expect_same_outcome(items[0].outcome, single_outcome);
    }
    EXPECT_EQ(redis::reply_text(*c.command({"GET", "single"})),
              redis::reply_text(*c.command({"GET", "batch"})));
  }
  EXPECT_GE(decided, 5);
  EXPECT_GE(refused, 8);
}

// lua/lease.lua against limit_lease / limit_lease_return: random histories of leases by
// four instances and returns of what they were granted, the clock jumping as above, the
// policy changing; every reply field, the stored value, the key's expiry and how many
// instances the script counted as asking must match.
TEST(RedisScriptTest, LeaseLuaMatchesCppOnRandomHistories) {
  test::redis_server redis;
  test::redis_client c(redis.port());
  const std::uint64_t seed = test::test_seed(20261210);
  SCOPED_TRACE(test::seed_trace(seed));
  std::mt19937_64 rng(seed);
  int leases = 0, granted = 0, denied = 0, returns = 0;
  struct held {
    std::int64_t units, at_ms;
  };
  for (int history = 0; history < 60; ++history) {
    const std::string key = "lease:" + std::to_string(history);
    const std::string askers_key = "{" + key + "}:askers";
    tracked t;
    std::vector<std::int64_t> last_ask(4, std::numeric_limits<std::int64_t>::min() / 2);  // none
    std::vector<held> out;  // grants not given back yet
    std::int64_t now = 1'700'000'000'000 + std::uniform_int_distribution<std::int64_t>(0, 1e9)(rng);
    policy pol = random_policy(rng);
    const std::int64_t ttl = 1 + static_cast<std::int64_t>(rng() % 3000);  // a policy's lease_ttl
    for (int step = 0; step < 120; ++step) {
      SCOPED_TRACE("history " + std::to_string(history) + " step " + std::to_string(step) + " " +
                   std::string(to_string(pol.algorithm)) + " stored " +
                   (t.state ? stored_form(t.algo, *t.state) : std::string("none")));
      now += random_step(rng) / 4;
      if (rng() % 25 == 0) {
        pol = random_policy(rng);
        out.clear();
      }
      auto p = random_params(rng, pol, 6);
      auto next = t.for_algo(p.algo);
      const bool is_return = !out.empty() && rng() % 3 == 0;
      const std::string code = std::to_string(static_cast<int>(p.algo) + 8 * (is_return ? 7 : 6));
      std::vector<std::string> args{"EVAL",
                                    std::string(detail::lua_lease.source),
                                    "2",
                                    key,
                                    askers_key,
                                    code,
                                    std::to_string(p.a),
                                    std::to_string(p.b),
                                    std::to_string(p.cost)};
      detail::limit_outcome cpp;
      std::int64_t cpp_granted = 0, cpp_valid = 0, cpp_at = 0;
      bool write = false;
      std::int64_t ttl_ms = 0;
      if (is_return) {
        ++returns;
        const std::size_t i = rng() % out.size();
        const held h = out[i];
        out.erase(out.begin() + static_cast<std::ptrdiff_t>(i));
        const auto units = std::uniform_int_distribution<std::int64_t>(0, h.units)(rng);
        const auto r = detail::limit_lease_return(p, units, h.at_ms, next, now * 1000);
        cpp = r.outcome;
        write = r.write;
        ttl_ms = r.ttl_ms;
        for (auto v : {units, h.at_ms, std::int64_t{0}, now}) args.push_back(std::to_string(v));
      } else {
        ++leases;
        const int who = static_cast<int>(rng() % 4);
        const std::int64_t want = 1 + static_cast<std::int64_t>(rng() % (2 * limit_of(pol)));
        // As the script keeps them: asks older than a ttl are dropped, then this one added.
        const std::int64_t forgotten = std::numeric_limits<std::int64_t>::min() / 2;
        for (auto& at : last_ask) at = at < now - ttl ? forgotten : at;
        last_ask[who] = now;
        std::int64_t askers = 0;
        for (const auto at : last_ask) askers += at != forgotten ? 1 : 0;
        const auto g = detail::limit_lease(p, {want, askers, ttl}, next, now * 1000);
        cpp = g.outcome;
        cpp_granted = g.granted;
        cpp_valid = g.valid_ms;
        cpp_at = g.at_ms;
        write = g.granted > 0;
        ttl_ms = g.ttl_ms;
        if (g.granted > 0) out.push_back({g.granted, g.at_ms});
        (g.granted > 0 ? granted : denied) += 1;
        for (auto v : {want, ttl, std::int64_t{who}, now}) args.push_back(std::to_string(v));
      }
      std::string cmds;
      const std::vector<std::string_view> views(args.begin(), args.end());
      redis::append_command(cmds, views.data(), views.size());
      redis::append_command(cmds, {"PTTL", key});
      redis::append_command(cmds, {"PERSIST", key});
      redis::append_command(cmds, {"PERSIST", askers_key});
      redis::append_command(cmds, {"GET", key});
      const auto replies = c.transaction(cmds, 5);
      std::string call;
      for (std::size_t i = 5; i < args.size(); ++i) call += " " + args[i];
      SCOPED_TRACE("ARGV" + call);
      const redisReply& r = *replies->element[0];
      ASSERT_EQ(r.type, REDIS_REPLY_ARRAY) << redis::reply_text(r);
      ASSERT_EQ(r.elements, 7u);
      const auto field = [&](std::size_t i) { return r.element[i]->integer; };
      EXPECT_EQ(field(0), cpp.allowed ? 1 : 0);
      EXPECT_EQ(field(1), cpp.remaining);
      EXPECT_EQ(field(2), cpp.retry_after_ms);
      EXPECT_EQ(field(3), cpp.reset_after_ms);
      EXPECT_EQ(field(4), cpp_granted);
      EXPECT_EQ(field(5), is_return ? 0 : cpp_valid);
      EXPECT_EQ(field(6), cpp_at);
      if (write) {
        t = {std::move(next), p.algo};
        if (t.state) {
          const long long pttl = replies->element[1]->integer;
          ASSERT_LE(pttl, expected_px(p.algo, ttl_ms));
          ASSERT_GE(pttl, expected_px(p.algo, ttl_ms) - 1000);
        }
      }
      const redisReply& stored = *replies->element[4];
      if (t.state) {
        ASSERT_EQ(redis::reply_text(stored), stored_form(t.algo, *t.state));
      } else {
        ASSERT_EQ(stored.type, REDIS_REPLY_NIL);
      }
    }
  }
  std::printf("%d leases: %d granted, %d denied; %d returns\n", leases, granted, denied, returns);
  EXPECT_GT(granted, leases / 10);
  EXPECT_GT(denied, leases / 20);
  EXPECT_GT(returns, leases / 10);
}

// lua/slots.lua against slots_acquire / slots_release / slots_renew: random histories of
// eight slot ids acquiring, releasing and renewing under a limit that changes, the clock
// jumping as above; every reply field, the holders and the key's expiry must match.
TEST(RedisScriptTest, SlotsLuaMatchesCppOnRandomHistories) {
  test::redis_server redis;
  test::redis_client c(redis.port());
  const std::uint64_t seed = test::test_seed(20261211);
  SCOPED_TRACE(test::seed_trace(seed));
  std::mt19937_64 rng(seed);
  std::vector<detail::slot_id> ids;
  for (int i = 0; i < 8; ++i) ids.push_back({rng(), rng()});
  int acquired = 0, refused = 0, released = 0, renewed = 0, missed = 0;
  for (int history = 0; history < 40; ++history) {
    const std::string key = "slots:" + std::to_string(history);
    detail::slot_table t;
    std::int64_t now = 1'700'000'000'000 + std::uniform_int_distribution<std::int64_t>(0, 1e9)(rng);
    std::int64_t limit = 1 + static_cast<std::int64_t>(rng() % 5);
    const std::int64_t ttl = 1 + static_cast<std::int64_t>(rng() % 2000);
    for (int step = 0; step < 150; ++step) {
      SCOPED_TRACE("history " + std::to_string(history) + " step " + std::to_string(step));
      now += random_step(rng) / 8;
      if (rng() % 20 == 0) limit = 1 + static_cast<std::int64_t>(rng() % 5);
      const auto& id = ids[rng() % ids.size()];
      const int op = static_cast<int>(rng() % 3);
      detail::slot_outcome cpp;
      switch (op) {
        case 0:
          cpp = detail::slots_acquire(t, id, limit, ttl, now);
          (cpp.held ? acquired : refused) += 1;
          break;
        case 1:
          cpp = detail::slots_release(t, id, now);
          (cpp.held ? released : missed) += 1;
          break;
        default:
          cpp = detail::slots_renew(t, id, ttl, now);
          (cpp.held ? renewed : missed) += 1;
          break;
      }
      std::string cmds;
      redis::append_command(
          cmds, {"EVAL", detail::lua_slots.source, "1", key, std::to_string(op), detail::to_hex(id),
                 std::to_string(limit), std::to_string(ttl), std::to_string(now)});
      redis::append_command(cmds, {"PTTL", key});
      redis::append_command(cmds, {"PERSIST", key});
      redis::append_command(cmds, {"ZRANGE", key, "0", "-1", "WITHSCORES"});
      const auto replies = c.transaction(cmds, 4);
      const redisReply& r = *replies->element[0];
      ASSERT_EQ(r.type, REDIS_REPLY_ARRAY) << redis::reply_text(r);
      ASSERT_EQ(r.elements, 4u);
      EXPECT_EQ(r.element[0]->integer, cpp.held ? 1 : 0) << "op " << op;
      EXPECT_EQ(r.element[1]->integer, cpp.in_flight);
      EXPECT_EQ(r.element[2]->integer, cpp.retry_after_ms);
      EXPECT_EQ(r.element[3]->integer, cpp.expires_in_ms);
      auto holders = t.holders;
      std::sort(holders.begin(), holders.end(), [](const auto& x, const auto& y) {
        return std::pair(x.ends_ms, detail::to_hex(x.id)) <
               std::pair(y.ends_ms, detail::to_hex(y.id));
      });
      const redisReply& z = *replies->element[3];
      ASSERT_EQ(z.elements, 2 * holders.size());
      std::int64_t last_end = 0;
      for (std::size_t i = 0; i < holders.size(); ++i) {
        EXPECT_EQ(redis::reply_text(*z.element[2 * i]), detail::to_hex(holders[i].id));
        EXPECT_EQ(std::stoll(std::string(redis::reply_text(*z.element[2 * i + 1]))),
                  holders[i].ends_ms);
        last_end = std::max(last_end, holders[i].ends_ms);
      }
      // The key lives until the last lease ends (at least: a release leaves it as it was).
      if (cpp.expires_in_ms > 0) {
        EXPECT_LE(replies->element[1]->integer, last_end - now);
        EXPECT_GE(replies->element[1]->integer, last_end - now - 1000);
      }
    }
  }
  std::printf("%d acquired, %d refused, %d released, %d renewed, %d missed\n", acquired, refused,
              released, renewed, missed);
  EXPECT_GT(refused, 100);
  EXPECT_GT(released, 100);
  EXPECT_GT(renewed, 100);
  EXPECT_GT(missed, 100);
}

}  // namespace
