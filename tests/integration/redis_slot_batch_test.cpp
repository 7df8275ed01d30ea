// Slot steps that share one script call (lua/slots.lua with n steps; the connection's queue
// batches the steps waiting together: decision_batcher.hpp), on a real redis-server and a
// real Cluster: a batch of mixed acquire / release / renew steps on several keys, some
// refused, one on a key of another type, answers exactly as the same steps one by one;
// NOSCRIPT still falls back to EVAL; concurrent callers never hold more than the limit.
#include <sluice/backend.hpp>
#include <sluice/error.hpp>
#include <sluice/redis_backend.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <future>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "redis/resp.hpp"
#include "redis/scripts.hpp"
#include "support/cluster_fixture.hpp"
#include "support/redis_client.hpp"
#include "support/redis_server.hpp"
#include "support/test_seed.hpp"

namespace {

using namespace sluice;
using namespace std::chrono_literals;

redis_options generous() {
  redis_options o;
  o.command_timeout = 2000ms;  // answers, not speed: CI machines stall
  o.connect_timeout = 2000ms;
  o.key_prefix = "";
  return o;
}

std::string id_of(std::uint64_t n) {
  char buf[33];
  std::snprintf(buf, sizeof buf, "%032llx", static_cast<unsigned long long>(n));
  return buf;
}

// One step of a history: on key `key` (an index), slot id `id` (an index).
struct step {
  slot_operation op;
  int key;
  int id;
};

std::vector<step> random_history(std::mt19937_64& rng, std::size_t n, int keys, int ids) {
  std::vector<step> h;
  for (std::size_t i = 0; i < n; ++i) {
    h.push_back({static_cast<slot_operation>(rng() % 3), static_cast<int>(rng() % keys),
                 static_cast<int>(rng() % ids)});
  }
  return h;
}

struct answer {
  std::error_code ec;
  slot_reply r;
};

// `h` on keys `names`, all submitted at once (they wait together and share calls).
std::vector<answer> run_at_once(backend& b, const std::vector<step>& h,
                                const std::vector<std::string>& names, std::uint64_t limit,
                                std::chrono::milliseconds ttl) {
  std::vector<answer> out(h.size());
  std::vector<std::promise<void>> done(h.size());
  for (std::size_t i = 0; i < h.size(); ++i) {
    const std::string id = id_of(static_cast<std::uint64_t>(h[i].id) + 1);
    b.async_slot(names[static_cast<std::size_t>(h[i].key)], {h[i].op, id, limit, ttl},
                 [&out, &done, i](std::error_code ec, slot_reply r) {
                   out[i] = {ec, r};
                   done[i].set_value();
                 });
  }
  for (auto& d : done) d.get_future().wait();
  return out;
}

// `h` on keys `names`, one step after the other's answer.
std::vector<answer> run_one_by_one(backend& b, const std::vector<step>& h,
                                   const std::vector<std::string>& names, std::uint64_t limit,
                                   std::chrono::milliseconds ttl) {
  std::vector<answer> out;
  for (const auto& s : h) {
    const std::string id = id_of(static_cast<std::uint64_t>(s.id) + 1);
    std::promise<answer> p;
    b.async_slot(names[static_cast<std::size_t>(s.key)], {s.op, id, limit, ttl},
                 [&p](std::error_code ec, slot_reply r) {
                   p.set_value({ec, r});
                 });
    out.push_back(p.get_future().get());
  }
  return out;
}

// The two runs answer alike, step by step: the same error, or the same held / in_flight /
// expires_in, and a refusal's retry_after within the lease (the two runs read the clock at
// different times).
void expect_same(const std::vector<answer>& batched, const std::vector<answer>& single,
                 const std::vector<step>& h, std::chrono::milliseconds ttl) {
  ASSERT_EQ(batched.size(), single.size());
  for (std::size_t i = 0; i < h.size(); ++i) {
    SCOPED_TRACE("step " + std::to_string(i) + " op " + std::to_string(static_cast<int>(h[i].op)) +
                 " key " + std::to_string(h[i].key) + " id " + std::to_string(h[i].id));
    EXPECT_EQ(batched[i].ec, single[i].ec) << batched[i].ec.message();
    EXPECT_EQ(batched[i].r.held, single[i].r.held);
    EXPECT_EQ(batched[i].r.in_flight, single[i].r.in_flight);
    EXPECT_EQ(batched[i].r.expires_in, single[i].r.expires_in);
    EXPECT_EQ(batched[i].r.retry_after > 0ms, single[i].r.retry_after > 0ms);
    EXPECT_LE(batched[i].r.retry_after, ttl);
  }
}

struct tally {
  int held = 0, refused = 0, missed = 0, failed = 0;
};
tally count(const std::vector<answer>& a, const std::vector<step>& h) {
  tally t;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].ec) {
      ++t.failed;
    } else if (a[i].r.held) {
      ++t.held;
    } else if (h[i].op == slot_operation::acquire) {
      ++t.refused;
    } else {
      ++t.missed;
    }
  }
  return t;
}

std::vector<std::string> names(const std::string& prefix, int n) {
  std::vector<std::string> v;
  for (int i = 0; i < n; ++i) v.push_back(prefix + std::to_string(i));
  return v;
}

// The script itself, with a fixed clock: n steps in one call answer and leave the keys
// exactly as the same steps in n calls, every field, holders, scores and expiry included.
TEST(RedisSlotBatchTest, OneCallOfNStepsIsNCallsOfOne) {
  test::redis_server redis;
  test::redis_client c(redis.port());
  const std::uint64_t seed = test::test_seed(20261207);
  SCOPED_TRACE(test::seed_trace(seed));
  std::mt19937_64 rng(seed);
  c.command({"SET", "a:bad", "x"});
  c.command({"SET", "b:bad", "x"});
  std::int64_t now = 1'700'000'000'000;
  tally t;
  for (int call = 0; call < 200; ++call) {
    SCOPED_TRACE("call " + std::to_string(call));
    // Leases of minutes of the replayed clock: they end in it, never in the real one while
    // the test runs (the keys' PEXPIRE is real time).
    now += static_cast<std::int64_t>(rng() % 400'000);
    const std::int64_t limit = 1 + static_cast<std::int64_t>(rng() % 3);
    const std::int64_t ttl = 100'000 + static_cast<std::int64_t>(rng() % 1'000'000);
    const auto h = random_history(rng, 1 + rng() % 12, 4, 6);
    const auto key = [](const char* side, int k) {
      return std::string(side) + (k == 3 ? "bad" : std::to_string(k));
    };
    std::vector<std::string> batch{"EVAL", std::string(detail::lua_slots.source),
                                   std::to_string(h.size())};
    for (const auto& s : h) batch.push_back(key("a:", s.key));
    for (const auto& s : h) {
      for (auto a : {std::to_string(static_cast<int>(s.op)), id_of(s.id + 1), std::to_string(limit),
                     std::to_string(ttl)}) {
        batch.push_back(std::move(a));
      }
    }
    batch.push_back(std::to_string(now));
    const auto got = c.command(batch);
    ASSERT_EQ(got->type, REDIS_REPLY_ARRAY) << redis::reply_text(*got);
    ASSERT_EQ(got->elements, 4 * h.size());
    for (std::size_t i = 0; i < h.size(); ++i) {
      const auto one = c.command({"EVAL", detail::lua_slots.source, "1", key("b:", h[i].key),
                                  std::to_string(static_cast<int>(h[i].op)), id_of(h[i].id + 1),
                                  std::to_string(limit), std::to_string(ttl), std::to_string(now)});
      SCOPED_TRACE("step " + std::to_string(i));
      if (h[i].key == 3) {
        // A key of another type: the step's own error; one step alone fails its call.
        EXPECT_EQ(one->type, REDIS_REPLY_ARRAY);
        EXPECT_EQ(got->element[4 * i]->type, REDIS_REPLY_ERROR);
        EXPECT_EQ(one->element[0]->type, REDIS_REPLY_ERROR);
        ++t.failed;
        continue;
      }
      ASSERT_EQ(one->type, REDIS_REPLY_ARRAY) << redis::reply_text(*one);
      for (std::size_t j = 0; j < 4; ++j) {
        EXPECT_EQ(got->element[4 * i + j]->integer, one->element[j]->integer) << "field " << j;
      }
      if (got->element[4 * i]->integer == 1) {
        ++t.held;
      } else if (h[i].op == slot_operation::acquire) {
        ++t.refused;
      } else {
        ++t.missed;
      }
    }
    for (int k = 0; k < 3; ++k) {
      const auto a = c.command({"ZRANGE", key("a:", k), "0", "-1", "WITHSCORES"});
      const auto b = c.command({"ZRANGE", key("b:", k), "0", "-1", "WITHSCORES"});
      ASSERT_EQ(a->elements, b->elements) << "key " << k;
      for (std::size_t j = 0; j < a->elements; ++j) {
        EXPECT_EQ(redis::reply_text(*a->element[j]), redis::reply_text(*b->element[j]));
      }
      // Set by the same arithmetic from the same "now", read a moment apart.
      const auto pa = c.pttl(key("a:", k));
      const auto pb = c.pttl(key("b:", k));
      EXPECT_EQ(pa < 0, pb < 0) << "key " << k;
      EXPECT_LE(std::abs(pa - pb), 1000) << "key " << k;
    }
  }
  EXPECT_GT(t.held, 100);
  EXPECT_GT(t.refused, 50);
  EXPECT_GT(t.missed, 50);
  EXPECT_GT(t.failed, 50);
}

// Through the backend: steps submitted at once share calls, and answer as one by one.
TEST(RedisSlotBatchTest, StepsThatWaitTogetherShareCallsAndAnswerAsOneByOne) {
  test::redis_server redis;
  test::redis_client c(redis.port());
  c.command({"SET", "at-once:bad", "x"});
  c.command({"SET", "one-by-one:bad", "x"});
  auto b = make_redis_backend(redis.url(), generous());
  const std::uint64_t seed = test::test_seed(20261208);
  SCOPED_TRACE(test::seed_trace(seed));
  std::mt19937_64 rng(seed);
  const auto h = random_history(rng, 600, 5, 12);
  auto a = names("at-once:", 4);
  a.push_back("at-once:bad");
  auto o = names("one-by-one:", 4);
  o.push_back("one-by-one:bad");
  const auto before = b->stats().other_script_calls;
  const auto batched = run_at_once(*b, h, a, 3, 60s);
  const auto calls = b->stats().other_script_calls - before;
  const auto single = run_one_by_one(*b, h, o, 3, 60s);
  expect_same(batched, single, h, 60s);
  const auto t = count(batched, h);
  EXPECT_GT(t.held, 50);
  EXPECT_GT(t.refused, 20);
  EXPECT_GT(t.missed, 20);
  EXPECT_GT(t.failed, 20);  // the key of another type, and only its steps
  EXPECT_EQ(static_cast<std::size_t>(t.failed),
            std::count_if(h.begin(), h.end(), [](const step& s) { return s.key == 4; }));
  std::printf("600 steps at once in %llu script calls\n", static_cast<unsigned long long>(calls));
  EXPECT_LT(calls, 600u) << "the steps that waited together shared calls";
}

TEST(RedisSlotBatchTest, ABatchMeetingNoScriptIsResentAsEval) {
  test::redis_server redis;
  test::redis_client c(redis.port());
  auto b = make_redis_backend(redis.url(), generous());
  std::mt19937_64 rng(7);
  const auto h = random_history(rng, 200, 3, 8);
  const auto warm = run_one_by_one(*b, h, names("warm:", 3), 2, 60s);
  ASSERT_FALSE(warm.front().ec) << warm.front().ec.message();
  c.script_flush();
  const auto noscript = b->stats().noscript;
  const auto batched = run_at_once(*b, h, names("at-once:", 3), 2, 60s);
  EXPECT_GT(b->stats().noscript, noscript);
  const auto single = run_one_by_one(*b, h, names("one-by-one:", 3), 2, 60s);
  expect_same(batched, single, h, 60s);
  EXPECT_EQ(count(batched, h).failed, 0);
}

// Callers that each acquire, then release at once, many at a time: never more holders of a
// key than its limit, and the limit reached.
void never_above_the_limit(backend& b, const std::vector<std::string>& keys) {
  constexpr std::uint64_t limit = 3;
  constexpr int callers = 200;
  constexpr int rounds = 20;  // held slots per caller
  std::mutex mu;
  std::vector<int> holders(keys.size(), 0);
  int most = 0;
  std::atomic<int> refused{0}, errors{0};
  std::promise<void> all_done;
  std::atomic<int> left{callers};
  struct caller {
    std::size_t key = 0;
    std::string id;
    int rounds_left = 0;
  };
  std::function<void(std::shared_ptr<caller>, bool)> next;
  next = [&](std::shared_ptr<caller> c, bool acquire) {
    const auto& k = keys[c->key];
    if (acquire) {
      b.async_slot(k, {slot_operation::acquire, c->id, limit, 60s},
                   [&, c](std::error_code ec, slot_reply r) {
                     if (ec) {
                       ++errors;
                     } else if (!r.held) {
                       ++refused;
                       return next(c, true);  // again, at once
                     } else {
                       std::lock_guard lock(mu);
                       most = std::max(most, ++holders[c->key]);
                     }
                     next(c, false);
                   });
      return;
    }
    b.async_slot(k, {slot_operation::release, c->id, limit, 60s},
                 [&, c](std::error_code ec, slot_reply) {
                   if (ec) ++errors;
                   {
                     // Held from the acquire's answer to the release's: the replies of a
                     // key's connection come in the order Redis ran the steps, so this
                     // is the server's count as the answers tell it.
                     std::lock_guard lock(mu);
                     --holders[c->key];
                   }
                   if (--c->rounds_left > 0) return next(c, true);
                   if (--left == 0) all_done.set_value();
                 });
  };
  for (int i = 0; i < callers; ++i) {
    auto c = std::make_shared<caller>();
    c->key = static_cast<std::size_t>(i) % keys.size();
    c->id = id_of(static_cast<std::uint64_t>(i) + 1);
    c->rounds_left = rounds;
    next(c, true);
  }
  ASSERT_EQ(all_done.get_future().wait_for(120s), std::future_status::ready);
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(most, static_cast<int>(limit)) << "the limit reached, never passed";
  EXPECT_GT(refused.load(), 0);
}

TEST(RedisSlotBatchTest, ConcurrentCallersNeverHoldMoreThanTheLimit) {
  test::redis_server redis;
  auto b = make_redis_backend(redis.url(), generous());
  never_above_the_limit(*b, names("busy:", 4));
}

// On a real Cluster: steps on one hash slot ({t}) share calls on its master, steps on keys of
// other masters go to theirs, and all answer as one by one.
TEST(RedisSlotBatchClusterTest, SameSlotStepsShareCallsAndAnswerAsOneByOne) {
  test::redis_cluster cluster;
  auto b = make_redis_backend(cluster.url(), generous());
  const std::uint64_t seed = test::test_seed(20261209);
  SCOPED_TRACE(test::seed_trace(seed));
  std::mt19937_64 rng(seed);
  const auto h = random_history(rng, 600, 7, 12);
  // Four keys on one slot, three spread (16384 slots over 3 masters).
  auto a = names("{t}at-once:", 4);
  for (const auto& k : names("at-once-spread:", 3)) a.push_back(k);
  auto o = names("{u}one-by-one:", 4);
  for (const auto& k : names("one-by-one-spread:", 3)) o.push_back(k);
  // A warm-up step: the slot map is known, so the steps go through the masters' queues.
  ASSERT_FALSE(run_one_by_one(*b, {{slot_operation::release, 0, 0}}, a, 3, 60s).front().ec);
  const auto node = cluster.master_of(cluster.server_key_slot("{t}"));
  auto c = cluster.client(node);
  c.command({"CONFIG", "RESETSTAT"});
  const auto batched = run_at_once(*b, h, a, 3, 60s);
  const auto stats = c.command({"INFO", "commandstats"});
  const auto single = run_one_by_one(*b, h, o, 3, 60s);
  expect_same(batched, single, h, 60s);
  const auto t = count(batched, h);
  EXPECT_EQ(t.failed, 0);
  EXPECT_GT(t.refused, 20);
  EXPECT_GT(t.missed, 20);
  // The steps on {t}'s master took fewer calls than there were steps there.
  const std::string info(redis::reply_text(*stats));
  const auto at = info.find("cmdstat_evalsha:calls=");
  ASSERT_NE(at, std::string::npos) << info;
  const long calls = std::stol(info.substr(at + 22));
  const auto on_node = std::count_if(h.begin(), h.end(), [&](const step& s) {
    return cluster.master_of(cluster.server_key_slot(a[static_cast<std::size_t>(s.key)])) == node;
  });
  std::printf("%ld steps on {t}'s master in %ld script calls\n", static_cast<long>(on_node), calls);
  EXPECT_LT(calls, on_node);
}

TEST(RedisSlotBatchClusterTest, ConcurrentCallersNeverHoldMoreThanTheLimit) {
  test::redis_cluster cluster;
  auto b = make_redis_backend(cluster.url(), generous());
  // Two keys on one slot (they batch together), two elsewhere.
  never_above_the_limit(*b, {"{t}busy:0", "{t}busy:1", "busy:2", "busy:3"});
}

}  // namespace
