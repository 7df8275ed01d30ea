// lua/token_bucket.lua and src/algorithm/token_bucket.cpp are the same math: random
// histories (costs, time steps, the clock going backwards, capacity and rate changes) are
// replayed through the script with ARGV[4] = now and through token_bucket_decide with the
// same now; every reply field, and the key's expiry, must match.
#include <cstdio>
#include <random>

#include <gtest/gtest.h>

#include <sluice/error.hpp>

#include "algorithm/token_bucket.hpp"
#include "redis/token_bucket_command.hpp"
#include "support/redis_client.hpp"
#include "support/redis_server.hpp"

namespace {

using namespace sluice;

struct shape {
  std::int64_t capacity;  // tokens
  std::int64_t rate;      // micro-tokens per ms (= milli-tokens per second)
};

// Extremes included: the slowest rate, the largest capacity, rates that divide badly.
constexpr shape shapes[] = {{1, 1},
                            {3, 7},
                            {10, 1000},
                            {10, 333},
                            {100, 123457},
                            {5, 1'000'000},
                            {2, 999'999},
                            {1'000'000'000, 1},
                            {1'000'000'000, 1'000'000'000'000},
                            {50, 2}};

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

// A cost of 1..3 tokens, or the whole capacity one time in `full_one_in`.
detail::token_bucket_params random_params(std::mt19937_64& rng, shape sh, unsigned full_one_in) {
  const std::int64_t cost_tokens = rng() % full_one_in == 0
                                       ? sh.capacity
                                       : std::uniform_int_distribution<std::int64_t>(
                                             1, std::min<std::int64_t>(sh.capacity, 3))(rng);
  return {sh.capacity * detail::micro_tokens_per_token, sh.rate,
          cost_tokens * detail::micro_tokens_per_token};
}

// Every field a caller sees (remaining in whole tokens, as the script replies it).
void expect_same_outcome(const detail::token_bucket_outcome& lua,
                         const detail::token_bucket_outcome& cpp) {
  ASSERT_EQ(lua.allowed, cpp.allowed);
  ASSERT_EQ(lua.remaining_ut / detail::micro_tokens_per_token,
            cpp.remaining_ut / detail::micro_tokens_per_token);
  ASSERT_EQ(lua.retry_after_ms, cpp.retry_after_ms);
  ASSERT_EQ(lua.reset_after_ms, cpp.reset_after_ms);
}

// A few keys, each with its own policy, for the multi-key scripts; the policies drift.
struct key_pool {
  static constexpr std::size_t size = 3;
  std::vector<std::string> names;
  std::vector<std::optional<detail::token_bucket_state>> states =
      std::vector<std::optional<detail::token_bucket_state>>(size);
  std::vector<shape> shapes_of = std::vector<shape>(size);

  key_pool(const std::string& prefix, int history, std::mt19937_64& rng) {
    for (std::size_t k = 0; k < size; ++k) {
      names.push_back(prefix + std::to_string(history) + ":" + std::to_string(k));
      shapes_of[k] = shapes[rng() % std::size(shapes)];
    }
  }
  void drift(std::mt19937_64& rng) {
    for (auto& sh : shapes_of) {
      if (rng() % 20 == 0) sh = shapes[rng() % std::size(shapes)];
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
  const std::uint64_t seed = std::random_device{}();
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  int steps = 0, allowed = 0, denied = 0;
  for (int history = 0; history < 60; ++history) {
    const std::string key = "history:" + std::to_string(history);
    std::optional<detail::token_bucket_state> state;
    std::int64_t now = 1'700'000'000'000 + std::uniform_int_distribution<std::int64_t>(0, 1e9)(rng);
    shape sh = shapes[rng() % std::size(shapes)];
    for (int step = 0; step < 150; ++step, ++steps) {
      SCOPED_TRACE("seed " + std::to_string(seed) + " history " + std::to_string(history) +
                   " step " + std::to_string(step));
      now += random_step(rng);
      if (rng() % 20 == 0) sh = shapes[rng() % std::size(shapes)];  // the policy changed
      const auto p = random_params(rng, sh, 4);

      const auto cpp = detail::token_bucket_decide(p, state, now);
      // The script, then the key's expiry and value, with nothing in between. Redis expires
      // keys in real time while the history runs on its own clock, so PERSIST keeps the
      // state for the next step (a 1 ms expiry cannot pass inside one transaction).
      std::string cmds;
      redis::append_token_bucket_command(cmds, redis::script_call::eval, key, p, now);
      redis::append_command(cmds, {"PTTL", key});
      redis::append_command(cmds, {"PERSIST", key});
      redis::append_command(cmds, {"GET", key});
      const auto replies = c.transaction(cmds, 4);
      detail::token_bucket_outcome lua;
      ASSERT_EQ(redis::parse_token_bucket_reply(*replies->element[0], lua),
                redis::script_reply::decided)
          << redis::reply_text(*replies->element[0]);
      ASSERT_NO_FATAL_FAILURE(expect_same_outcome(lua, cpp));
      const long long ttl = replies->element[1]->integer;
      const redisReply& stored = *replies->element[3];
      if (cpp.allowed) {
        ++allowed;
        state = cpp.next;
        // The key lives exactly until the bucket would be full: then it may vanish.
        ASSERT_LE(ttl, cpp.reset_after_ms);
        ASSERT_GE(ttl, cpp.reset_after_ms - 1000);
        ASSERT_EQ(redis::reply_text(stored),
                  std::to_string(cpp.next.level_ut) + " " + std::to_string(cpp.next.ts_ms));
      } else {
        ++denied;
      }
    }
  }
  std::printf("%d steps: %d allowed, %d denied\n", steps, allowed, denied);
  EXPECT_GT(allowed, steps / 10);
  EXPECT_GT(denied, steps / 10);
}

// lua/token_bucket_multi.lua against token_bucket_decide_all: calls of 2..5 items over a
// pool of 3 keys (so keys repeat within a call), each key with its own, changing policy.
TEST(RedisScriptTest, MultiLuaMatchesCppOnRandomHistories) {
  test::redis_server redis;
  test::redis_client c(redis.port());
  const std::uint64_t seed = std::random_device{}();
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  int steps = 0, committed = 0, refused = 0, repeated = 0;
  for (int history = 0; history < 30; ++history) {
    key_pool kp("multi:", history, rng);
    constexpr std::size_t pool = key_pool::size;
    auto& names = kp.names;
    auto& states = kp.states;
    std::int64_t now = 1'700'000'000'000 + std::uniform_int_distribution<std::int64_t>(0, 1e9)(rng);
    for (int step = 0; step < 100; ++step, ++steps) {
      SCOPED_TRACE("seed " + std::to_string(seed) + " history " + std::to_string(history) +
                   " step " + std::to_string(step));
      now += random_step(rng);
      kp.drift(rng);
      const std::size_t n = 2 + rng() % 4;
      std::vector<detail::token_bucket_item> items;
      std::vector<redis::multi_key> keys;
      std::vector<bool> seen(pool, false);
      bool dup = false;
      for (std::size_t i = 0; i < n; ++i) {
        const std::size_t k = rng() % pool;
        dup = dup || seen[k];
        seen[k] = true;
        const auto p = random_params(rng, kp.shapes_of[k], 5);
        items.push_back({p, k});
        keys.push_back({names[k], p});
      }
      repeated += dup ? 1 : 0;
      const auto cpp = detail::token_bucket_decide_all(items, states, now);

      std::string cmds;
      redis::append_token_bucket_multi_command(cmds, redis::script_call::eval, keys, now);
      kp.append_probes(cmds);
      const auto replies = c.transaction(cmds, 1 + 3 * pool);
      std::vector<detail::token_bucket_outcome> lua;
      ASSERT_EQ(redis::parse_token_bucket_multi_reply(*replies->element[0], n, lua),
                redis::script_reply::decided)
          << redis::reply_text(*replies->element[0]);
      for (std::size_t i = 0; i < n; ++i) {
        SCOPED_TRACE("item " + std::to_string(i));
        ASSERT_NO_FATAL_FAILURE(expect_same_outcome(lua[i], cpp.items[i]));
      }
      if (cpp.allowed) {
        ++committed;
        for (std::size_t k = 0; k < pool; ++k) {
          if (cpp.next[k]) states[k] = cpp.next[k];
        }
      } else {
        ++refused;
      }
      // Written exactly when all allowed; otherwise every key is as it was.
      for (std::size_t k = 0; k < pool; ++k) {
        SCOPED_TRACE("key " + std::to_string(k));
        const redisReply& stored = *replies->element[1 + 3 * k + 2];
        if (!states[k]) {
          ASSERT_EQ(stored.type, REDIS_REPLY_NIL);
          continue;
        }
        ASSERT_EQ(redis::reply_text(stored),
                  std::to_string(states[k]->level_ut) + " " + std::to_string(states[k]->ts_ms));
        if (cpp.allowed && cpp.next[k]) {
          const long long ttl = replies->element[1 + 3 * k]->integer;
          ASSERT_LE(ttl, cpp.ttl_ms[k]);
          ASSERT_GE(ttl, cpp.ttl_ms[k] - 1000);
        }
      }
    }
  }
  std::printf("%d calls: %d committed, %d refused, %d with a repeated key\n", steps, committed,
              refused, repeated);
  EXPECT_GT(committed, steps / 10);
  EXPECT_GT(refused, steps / 10);
  EXPECT_GT(repeated, steps / 10);
}

// lua/token_bucket_batch.lua against token_bucket_decide item by item: a batch is n
// independent decisions in order, so a repeated key sees what its earlier item wrote, and a
// denial writes nothing. Calls of 1..8 items over a pool of 3 keys, policies changing.
TEST(RedisScriptTest, BatchLuaMatchesCppOnRandomHistories) {
  test::redis_server redis;
  test::redis_client c(redis.port());
  const std::uint64_t seed = std::random_device{}();
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  int calls = 0, allowed = 0, denied = 0, repeated = 0;
  for (int history = 0; history < 30; ++history) {
    key_pool kp("batch:", history, rng);
    constexpr std::size_t pool = key_pool::size;
    auto& names = kp.names;
    auto& states = kp.states;
    std::int64_t now = 1'700'000'000'000 + std::uniform_int_distribution<std::int64_t>(0, 1e9)(rng);
    for (int step = 0; step < 80; ++step, ++calls) {
      SCOPED_TRACE("seed " + std::to_string(seed) + " history " + std::to_string(history) +
                   " step " + std::to_string(step));
      now += random_step(rng);
      kp.drift(rng);
      const std::size_t n = 1 + rng() % 8;
      std::vector<redis::multi_key> keys;
      std::vector<detail::token_bucket_outcome> cpp;
      std::vector<std::optional<std::int64_t>> ttl(pool);  // of the key's last write
      std::vector<bool> seen(pool, false);
      bool dup = false;
      for (std::size_t i = 0; i < n; ++i) {
        const std::size_t k = rng() % pool;
        dup = dup || seen[k];
        seen[k] = true;
        const auto p = random_params(rng, kp.shapes_of[k], 4);
        keys.push_back({names[k], p});
        cpp.push_back(detail::token_bucket_decide(p, states[k], now));
        if (cpp.back().allowed) {
          states[k] = cpp.back().next;
          ttl[k] = cpp.back().reset_after_ms;
        }
      }
      repeated += dup ? 1 : 0;

      std::string cmds;
      redis::append_token_bucket_batch_command(cmds, redis::script_call::eval, keys, now);
      kp.append_probes(cmds);
      const auto replies = c.transaction(cmds, 1 + 3 * pool);
      std::vector<redis::batch_item> lua;
      ASSERT_EQ(redis::parse_token_bucket_batch_reply(*replies->element[0], n, lua),
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
        if (!states[k]) {
          ASSERT_EQ(stored.type, REDIS_REPLY_NIL);
          continue;
        }
        ASSERT_EQ(redis::reply_text(stored),
                  std::to_string(states[k]->level_ut) + " " + std::to_string(states[k]->ts_ms));
        if (ttl[k]) {
          const long long t = replies->element[1 + 3 * k]->integer;
          ASSERT_LE(t, *ttl[k]);
          ASSERT_GE(t, *ttl[k] - 1000);
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
  const detail::token_bucket_params p{10'000'000, 1000, 1'000'000};
  const detail::token_bucket_params q{5'000'000, 1000, 2'000'000};
  // "hash" reads like a missing key to the script's MGET; twice, and between items of
  // other parameters, so that the script's runs of parameters are crossed too.
  // A cost above the capacity (which the limiter refuses before Redis) denies a missing
  // key without a write, so the script has to tell the hash apart another way.
  const detail::token_bucket_params over{1'000'000, 1000, 2'000'000};
  const std::vector<redis::multi_key> keys{{"good", p},    {"garbage", p},   {"hash", p},
                                           {"fresh", q},   {"hash", q},      {"good", p},
                                           {"hash", over}, {"missing", over}};
  std::string cmd;
  redis::append_token_bucket_batch_command(cmd, redis::script_call::eval, keys, 5000);
  const auto replies = c.transaction(cmd, 1);
  std::vector<redis::batch_item> items;
  ASSERT_EQ(redis::parse_token_bucket_batch_reply(*replies->element[0], keys.size(), items),
            redis::script_reply::decided)
      << redis::reply_text(*replies->element[0]);
  EXPECT_FALSE(items[0].ec);
  EXPECT_EQ(items[0].outcome.remaining_ut, 9'000'000);
  EXPECT_EQ(items[1].ec, errc::backend_script_error);
  EXPECT_EQ(items[2].ec, errc::backend_script_error);
  EXPECT_FALSE(items[3].ec);
  EXPECT_EQ(items[3].outcome.remaining_ut, 3'000'000);
  EXPECT_EQ(items[4].ec, errc::backend_script_error);
  EXPECT_FALSE(items[5].ec);
  EXPECT_EQ(items[5].outcome.remaining_ut, 8'000'000);
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
  EXPECT_THROW(c.eval_token_bucket("bad", {10'000'000, 1000, 1'000'000}, 1000), std::runtime_error);
}

// The single-key and batch scripts read a stored value the same way (lua/prelude.lua): a
// value is a state both decide and write alike, or one both refuse with the same error,
// leaving it as it was.
TEST(RedisScriptTest, SingleAndBatchScriptsAgreeOnEveryStoredValue) {
  test::redis_server redis;
  test::redis_client c(redis.port());
  const std::vector<std::string> values{
      "5000000 900", "0 1000",   "99999999999 0", "3000000 2000", "10000000 1000",
      "garbage",     "1",        "x y",           "5 ",           " 5",
      "5 x",         "1e6 900",  "0x10 900",      "-1 900",       "5000000 900 7",
      "",            "nan 900",  "5000000  900"};
  const detail::token_bucket_params p{10'000'000, 1000, 1'000'000};
  int decided = 0, refused = 0;
  for (const auto& v : values) {
    SCOPED_TRACE("stored \"" + v + "\"");
    c.command({"SET", "single", v});
    c.command({"SET", "batch", v});
    std::string cmds;
    redis::append_token_bucket_command(cmds, redis::script_call::eval, "single", p, 1000);
    const std::vector<redis::multi_key> keys{{"batch", p}};
    redis::append_token_bucket_batch_command(cmds, redis::script_call::eval, keys, 1000);
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
      detail::token_bucket_outcome single_outcome;
      ASSERT_EQ(redis::parse_token_bucket_reply(one, single_outcome), redis::script_reply::decided);
      std::vector<redis::batch_item> items;
      ASSERT_EQ(redis::parse_token_bucket_batch_reply(batch, 1, items),
                redis::script_reply::decided);
      ASSERT_FALSE(items[0].ec);
      expect_same_outcome(items[0].outcome, single_outcome);
    }
    EXPECT_EQ(redis::reply_text(*c.command({"GET", "single"})),
              redis::reply_text(*c.command({"GET", "batch"})));
  }
  EXPECT_GE(decided, 5);
  EXPECT_GE(refused, 8);
}

}  // namespace
