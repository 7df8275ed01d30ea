// The connection's one queue of script calls (src/redis/decision_batcher.hpp) against a real
// redis-server, its I/O run by the test's own thread so that what waits and what leaves
// together is exact: a lone decision is its own call; decisions that wait leave together, in
// batches; an opaque script call (check_all's, a Cluster client's) keeps its place in line,
// takes no batch slot and is re-sent as EVAL on NOSCRIPT; decisions and opaque calls share
// one bound and one breaker; a request past its deadline is not sent; stop() fails what waits.
#include <sluice/error.hpp>
#include <sluice/policy.hpp>

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <boost/asio/io_context.hpp>

#include "algorithm/limit.hpp"
#include "redis/connection.hpp"
#include "redis/decide_command.hpp"
#include "redis/decision_batcher.hpp"
#include "redis/handshake.hpp"
#include "redis/resp.hpp"
#include "support/redis_client.hpp"
#include "support/redis_server.hpp"

namespace {

using namespace std::chrono_literals;
using namespace sluice;
using clock_type = std::chrono::steady_clock;

policy bucket() {
  policy p;
  p.capacity = 1000;
  p.refill_per_second = 1;
  return p;
}

// A connection and its queue on an io_context that the test runs.
class queue_on_redis {
 public:
  queue_on_redis(const test::redis_server& redis, redis::batcher_options o) {
    redis::connection_config c;
    c.port = redis.port();
    c.connect_timeout = 2s;
    c.command_timeout = 5s;
    c.backoff_min = 10ms;
    c.backoff_max = 50ms;
    c.handshake = redis::make_handshake({});
    conn = std::make_shared<redis::connection>(io, c);
    conn->start();
    o.command_timeout = 5s;
    queue = std::make_shared<redis::decision_batcher>(io, conn, std::move(o));
    EXPECT_TRUE(run_until([&] { return conn->current_state() == redis::link_state::up; }));
  }
  ~queue_on_redis() {
    queue->stop();
    conn->stop();
    io.run_for(2s);
  }
  queue_on_redis(const queue_on_redis&) = delete;
  queue_on_redis& operator=(const queue_on_redis&) = delete;

  // Runs the I/O until `done`, for at most `within`.
  bool run_until(const std::function<bool()>& done, std::chrono::seconds within = 5s) {
    const auto until = clock_type::now() + within;
    while (!done() && clock_type::now() < until) io.run_one_for(10ms);
    return done();
  }

  // Submits a decision on `key` that appends its outcome (or error) to `log` as `name`.
  void decide(const std::string& key, const std::string& name, std::vector<std::string>& log) {
    queue->submit(key, detail::to_limit_params(bucket(), 1), limit_of(bucket()),
                  [&log, name](std::error_code ec, decision d) {
                    log.push_back(name + (ec ? ":" + ec.message() : d.allowed ? ":ok" : ":no"));
                  });
  }

  boost::asio::io_context io{1};
  std::shared_ptr<redis::connection> conn;
  std::shared_ptr<redis::decision_batcher> queue;
};

// An opaque call that runs one plain command (the queue does not look into it) and appends
// its outcome to `log` as `name`.
struct command_call {
  std::vector<std::string> args;
  std::string name;
  std::vector<std::string>* log;
  void append(std::string& out, redis::script_call) const {
    std::vector<std::string_view> views(args.begin(), args.end());
    redis::append_command(out, views.data(), views.size());
  }
  void operator()(std::error_code ec, const redis::reply_ptr& reply) const {
    if (ec) {
      log->push_back(name + ":" + ec.message());
    } else {
      log->push_back(name + ":" + std::to_string(reply->integer));
    }
  }
};

TEST(RedisBatcherTest, ALoneDecisionIsItsOwnCall) {
  test::redis_server redis;
  queue_on_redis q(redis, {.max_batch = 32});
  std::vector<std::string> log;
  for (int i = 0; i < 3; ++i) {
    q.decide("lone", "d", log);
    ASSERT_TRUE(q.run_until([&] { return log.size() == static_cast<std::size_t>(i + 1); }));
  }
  EXPECT_EQ(log, (std::vector<std::string>{"d:ok", "d:ok", "d:ok"}));
  EXPECT_EQ(q.queue->sent().calls, 3u);
  EXPECT_EQ(q.queue->sent().decisions, 3u);
}

TEST(RedisBatcherTest, DecisionsThatWaitLeaveTogetherInBatches) {
  test::redis_server redis;
  queue_on_redis q(redis, {.max_batch = 32, .max_batches_in_flight = 4});
  std::vector<std::string> log;
  // Submitted before the I/O thread runs: all of them wait, and leave as four calls.
  for (int i = 0; i < 100; ++i) q.decide("k" + std::to_string(i % 7), "d", log);
  EXPECT_EQ(q.queue->accepted(), 100u);
  ASSERT_TRUE(q.run_until([&] { return log.size() == 100; }));
  EXPECT_EQ(std::count(log.begin(), log.end(), "d:ok"), 100);
  EXPECT_EQ(q.queue->sent().calls, 4u);  // 32 + 32 + 32 + 4
  EXPECT_EQ(q.queue->sent().decisions, 100u);
  EXPECT_EQ(q.queue->accepted(), 0u);
}

TEST(RedisBatcherTest, AnOpaqueCallKeepsItsPlaceInLine) {
  test::redis_server redis;
  queue_on_redis q(redis, {.max_batch = 32});
  std::vector<std::string> log;
  q.decide("a", "d1", log);
  q.decide("b", "d2", log);
  q.queue->submit_call(clock_type::now() + 5s, command_call{{"INCR", "seq"}, "call", &log});
  q.decide("a", "d3", log);
  q.decide("c", "d4", log);
  ASSERT_TRUE(q.run_until([&] { return log.size() == 5; }));
  // Nothing after the call was batched with what came before it.
  EXPECT_EQ(log, (std::vector<std::string>{"d1:ok", "d2:ok", "call:1", "d3:ok", "d4:ok"}));
  EXPECT_EQ(q.queue->sent().calls, 2u);  // [d1 d2], [d3 d4]; the opaque call is not a batch
  EXPECT_EQ(q.queue->sent().decisions, 4u);
}

TEST(RedisBatcherTest, OpaqueCallsTakeNoBatchSlot) {
  test::redis_server redis;
  queue_on_redis q(redis, {.max_batch = 2, .max_batches_in_flight = 1});
  std::vector<std::string> log;
  redis.pause();  // nothing is answered: what the queue hands over stays at the connection
  for (int i = 0; i < 3; ++i) {
    q.queue->submit_call(clock_type::now() + 5s,
                         command_call{{"INCR", "n"}, "c" + std::to_string(i), &log});
  }
  q.decide("a", "d1", log);
  q.decide("b", "d2", log);
  q.decide("c", "d3", log);  // waits for the one batch slot
  ASSERT_TRUE(q.run_until([&] { return q.conn->pending() == 4; }));
  q.io.poll();
  EXPECT_EQ(q.conn->pending(), 4u);  // three calls and the batch [d1 d2]
  EXPECT_EQ(q.queue->accepted(), 6u);
  redis.resume();
  ASSERT_TRUE(q.run_until([&] { return log.size() == 6; }));
  EXPECT_EQ(log, (std::vector<std::string>{"c0:1", "c1:2", "c2:3", "d1:ok", "d2:ok", "d3:ok"}));
  EXPECT_EQ(q.queue->sent().calls, 2u);
}

TEST(RedisBatcherTest, DecisionsAndCallsShareOneBound) {
  test::redis_server redis;
  queue_on_redis q(redis, {.max_batch = 32, .max_accepted = 3});
  std::vector<std::string> log;
  q.decide("a", "d1", log);
  q.queue->submit_call(clock_type::now() + 5s, command_call{{"INCR", "n"}, "c1", &log});
  q.decide("b", "d2", log);
  EXPECT_EQ(q.queue->accepted(), 3u);
  // Refused at once, inline: the fourth request of either kind.
  q.decide("c", "d3", log);
  q.queue->submit_call(clock_type::now() + 5s, command_call{{"INCR", "n"}, "c2", &log});
  const auto overloaded = make_error_code(errc::backend_overloaded).message();
  EXPECT_EQ(log, (std::vector<std::string>{"d3:" + overloaded, "c2:" + overloaded}));
  ASSERT_TRUE(q.run_until([&] { return log.size() == 5; }));
  EXPECT_EQ(q.queue->accepted(), 0u);
}

TEST(RedisBatcherTest, ACallPastItsDeadlineIsNotSent) {
  test::redis_server redis;
  queue_on_redis q(redis, {.max_batch = 32});
  std::vector<std::string> log;
  q.queue->submit_call(clock_type::now() - 1ms, command_call{{"INCR", "late"}, "late", &log});
  q.queue->submit_call(clock_type::now() + 5s, command_call{{"EXISTS", "late"}, "exists", &log});
  ASSERT_TRUE(q.run_until([&] { return log.size() == 2; }));
  EXPECT_EQ(log[0], "late:" + make_error_code(errc::backend_timeout).message());
  EXPECT_EQ(log[1], "exists:0");
  EXPECT_EQ(q.queue->accepted(), 0u);
}

// check_all's call, as the standalone backend sends it: EVALSHA, and after SCRIPT FLUSH the
// source once as EVAL, within the queue (counted as the queue's NOSCRIPT).
struct multi_call {
  std::vector<std::string> keys;
  std::function<void(std::error_code, std::vector<decision>)> done;
  void append(std::string& out, redis::script_call how) const {
    std::vector<redis::multi_key> k;
    for (const auto& key : keys) k.push_back({key, detail::to_limit_params(bucket(), 1)});
    redis::append_decide_multi_command(out, how, k);
  }
  void operator()(std::error_code ec, const redis::reply_ptr& reply) const {
    std::vector<decision> ds;
    const std::vector<std::uint64_t> limits(keys.size(), limit_of(bucket()));
    if (!ec) ec = redis::to_decisions(*reply, limits, ds);
    done(ec, ds);
  }
};

TEST(RedisBatcherTest, AnOpaqueScriptCallIsResentAsEvalOnNoscript) {
  test::redis_server redis;
  queue_on_redis q(redis, {.max_batch = 32});
  test::redis_client(redis.port()).command({"SCRIPT", "FLUSH"});
  bool done = false;
  std::error_code got;
  std::size_t decided = 0;
  q.queue->submit_call(clock_type::now() + 5s,
                       multi_call{{"m1", "m2"}, [&](std::error_code ec, std::vector<decision> ds) {
                                    done = true;
                                    got = ec;
                                    decided = ds.size();
                                  }});
  ASSERT_TRUE(q.run_until([&] { return done; }));
  EXPECT_FALSE(got) << got.message();
  EXPECT_EQ(decided, 2u);
  EXPECT_EQ(q.queue->sent().noscript, 1u);
}

TEST(RedisBatcherTest, StopFailsWhatWaitsAndLetsWhatWasSentComplete) {
  test::redis_server redis;
  queue_on_redis q(redis, {.max_batch = 2, .max_batches_in_flight = 1});
  std::vector<std::string> log;
  redis.pause();  // the order of what follows does not depend on how fast Redis answers
  for (int i = 1; i <= 4; ++i) q.decide("k", "d" + std::to_string(i), log);
  // The first flush sends [d1 d2]; d3 and d4 wait for its slot, and are failed by stop().
  ASSERT_TRUE(q.run_until([&] { return q.conn->pending() == 1; }));
  q.queue->stop();
  ASSERT_TRUE(q.run_until([&] { return log.size() == 2; }));
  redis.resume();
  ASSERT_TRUE(q.run_until([&] { return log.size() == 4; }));
  const auto stopping = make_error_code(errc::backend_shutting_down).message();
  EXPECT_EQ(log, (std::vector<std::string>{"d3:" + stopping, "d4:" + stopping, "d1:ok", "d2:ok"}));
  // Refused at once from then on, whatever the kind.
  q.queue->submit_call(clock_type::now() + 5s, command_call{{"INCR", "n"}, "c", &log});
  EXPECT_EQ(log.back(), "c:" + stopping);
}

TEST(RedisBatcherTest, TheBreakerRefusesEveryKindAtOnceWhileDown) {
  test::redis_server redis;
  int failures = 0;
  queue_on_redis q(redis, {.max_batch = 32, .on_failure = [&](std::error_code) { ++failures; }});
  redis.kill();
  ASSERT_TRUE(q.run_until([&] { return q.conn->current_state() == redis::link_state::down; }));
  std::vector<std::string> log;
  q.decide("k", "d", log);
  q.queue->submit_call(clock_type::now() + 5s, command_call{{"INCR", "n"}, "c", &log});
  const auto unavailable = make_error_code(errc::backend_unavailable).message();
  EXPECT_EQ(log, (std::vector<std::string>{"d:" + unavailable, "c:" + unavailable}));
  EXPECT_EQ(failures, 1);  // the decision's; an opaque call's caller sees its own error
  EXPECT_EQ(q.queue->accepted(), 0u);
}

}  // namespace
