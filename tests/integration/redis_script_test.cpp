// lua/token_bucket.lua and src/algorithm/token_bucket.cpp are the same math: random
// histories (costs, time steps, the clock going backwards, capacity and rate changes) are
// replayed through the script with ARGV[4] = now and through token_bucket_decide with the
// same now; every reply field, and the key's expiry, must match.
#include <cstdio>
#include <random>

#include <gtest/gtest.h>

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
      const std::int64_t cost_tokens = rng() % 4 == 0
                                           ? sh.capacity
                                           : std::uniform_int_distribution<std::int64_t>(
                                                 1, std::min<std::int64_t>(sh.capacity, 3))(rng);
      const detail::token_bucket_params p{sh.capacity * detail::micro_tokens_per_token, sh.rate,
                                          cost_tokens * detail::micro_tokens_per_token};

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
      ASSERT_EQ(lua.allowed, cpp.allowed);
      ASSERT_EQ(lua.remaining_ut / detail::micro_tokens_per_token,
                cpp.remaining_ut / detail::micro_tokens_per_token);
      ASSERT_EQ(lua.retry_after_ms, cpp.retry_after_ms);
      ASSERT_EQ(lua.reset_after_ms, cpp.reset_after_ms);
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
    constexpr std::size_t pool = 3;
    std::vector<std::string> names;
    std::vector<std::optional<detail::token_bucket_state>> states(pool);
    std::vector<shape> shapes_of(pool);
    for (std::size_t k = 0; k < pool; ++k) {
      names.push_back("multi:" + std::to_string(history) + ":" + std::to_string(k));
      shapes_of[k] = shapes[rng() % std::size(shapes)];
    }
    std::int64_t now = 1'700'000'000'000 + std::uniform_int_distribution<std::int64_t>(0, 1e9)(rng);
    for (int step = 0; step < 100; ++step, ++steps) {
      SCOPED_TRACE("seed " + std::to_string(seed) + " history " + std::to_string(history) +
                   " step " + std::to_string(step));
      now += random_step(rng);
      for (auto& sh : shapes_of) {
        if (rng() % 20 == 0) sh = shapes[rng() % std::size(shapes)];
      }
      const std::size_t n = 2 + rng() % 4;
      std::vector<detail::token_bucket_item> items;
      std::vector<redis::multi_key> keys;
      std::vector<bool> seen(pool, false);
      bool dup = false;
      for (std::size_t i = 0; i < n; ++i) {
        const std::size_t k = rng() % pool;
        dup = dup || seen[k];
        seen[k] = true;
        const shape sh = shapes_of[k];
        const std::int64_t cost_tokens = rng() % 5 == 0
                                             ? sh.capacity
                                             : std::uniform_int_distribution<std::int64_t>(
                                                   1, std::min<std::int64_t>(sh.capacity, 3))(rng);
        const detail::token_bucket_params p{sh.capacity * detail::micro_tokens_per_token, sh.rate,
                                            cost_tokens * detail::micro_tokens_per_token};
        items.push_back({p, k});
        keys.push_back({names[k], p});
      }
      repeated += dup ? 1 : 0;
      const auto cpp = detail::token_bucket_decide_all(items, states, now);

      std::string cmds;
      redis::append_token_bucket_multi_command(cmds, redis::script_call::eval, keys, now);
      for (std::size_t k = 0; k < pool; ++k) {
        redis::append_command(cmds, {"PTTL", names[k]});
        redis::append_command(cmds, {"PERSIST", names[k]});
        redis::append_command(cmds, {"GET", names[k]});
      }
      const auto replies = c.transaction(cmds, 1 + 3 * pool);
      std::vector<detail::token_bucket_outcome> lua;
      ASSERT_EQ(redis::parse_token_bucket_multi_reply(*replies->element[0], n, lua),
                redis::script_reply::decided)
          << redis::reply_text(*replies->element[0]);
      for (std::size_t i = 0; i < n; ++i) {
        SCOPED_TRACE("item " + std::to_string(i));
        ASSERT_EQ(lua[i].allowed, cpp.items[i].allowed);
        ASSERT_EQ(lua[i].remaining_ut / detail::micro_tokens_per_token,
                  cpp.items[i].remaining_ut / detail::micro_tokens_per_token);
        ASSERT_EQ(lua[i].retry_after_ms, cpp.items[i].retry_after_ms);
        ASSERT_EQ(lua[i].reset_after_ms, cpp.items[i].reset_after_ms);
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

TEST(RedisScriptTest, MalformedStateIsAScriptError) {
  test::redis_server redis;
  test::redis_client c(redis.port());
  c.command({"SET", "bad", "garbage"});
  EXPECT_THROW(c.eval_token_bucket("bad", {10'000'000, 1000, 1'000'000}, 1000), std::runtime_error);
}

}  // namespace
