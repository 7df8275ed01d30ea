// How async checks on Redis complete on the caller's io_context, when one Redis reply
// answers many of them at once (they are then posted to that io_context as one operation,
// include/sluice/completion.hpp). What a caller relies on: every handler runs
// exactly once, on its own io_context's thread; a handler that throws makes run() throw as
// Asio's handlers do, and loses none of the others; and each handler is destroyed on the
// thread that ran it, never on the backend's I/O thread.
#include <sluice/limiter.hpp>
#include <sluice/redis_backend.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include <gtest/gtest.h>

#include "support/destruction_probe.hpp"
#include "support/redis_server.hpp"

namespace {

using namespace sluice;
using namespace std::chrono_literals;

// 3000 checks from four threads, their handlers bound to `bind_to` (an executor of `io`,
// which this thread runs).
template <class Executor>
void expect_each_completes_once_on_its_thread(boost::asio::io_context& io, Executor bind_to) {
  constexpr int keys = 20;
  constexpr std::uint64_t capacity = 100;
  constexpr int threads = 4;
  constexpr int per_thread = 750;  // 150 checks per key: each key admits exactly 100
  constexpr int total = threads * per_thread;
  constexpr int every = 97;  // every 97th handler throws after doing its part
  test::redis_server redis;
  redis_options o;
  o.url = redis.url();
  o.command_timeout = 10s;
  limiter lim(make_redis_backend(o.url, o));
  policy p;
  p.capacity = capacity;
  p.refill_per_second = 0.001;
  p.on_failure = failure_mode::closed;

  auto work = boost::asio::make_work_guard(io);
  boost::asio::steady_timer give_up(io, 60s);
  give_up.async_wait([&](boost::system::error_code ec) {
    if (!ec) work.reset();  // a lost completion fails the counts below instead of hanging
  });
  const auto home = std::this_thread::get_id();
  // Touched only by the handlers, all on this thread (checked): no atomics needed.
  std::array<int, keys> admitted{};
  int completed = 0;
  int wrong_thread = 0;
  int degraded = 0;
  test::destruction_record destroyed;
  destroyed.home = home;

  std::vector<std::thread> submitters;
  for (int t = 0; t < threads; ++t) {
    submitters.emplace_back([&, t] {
      for (int i = 0; i < per_thread; ++i) {
        const int k = (t * 7 + i) % keys;
        const int n = t * per_thread + i;
        lim.async_check("bound:" + std::to_string(k), p, 1,
                        boost::asio::bind_executor(
                            bind_to, [&, k, n, probe = test::destruction_probe(&destroyed)](
                                         std::error_code ec, decision d) {
                              EXPECT_FALSE(ec);
                              if (std::this_thread::get_id() != home) ++wrong_thread;
                              if (d.allowed) ++admitted[static_cast<std::size_t>(k)];
                              if (d.degraded) ++degraded;
                              if (++completed == total) {
                                give_up.cancel();
                                work.reset();
                              }
                              if (n % every == 0) throw std::runtime_error("thrown by a handler");
                            }));
      }
    });
  }
  int thrown = 0;
  for (;;) {
    try {
      io.run();
      break;
    } catch (const std::runtime_error&) {
      ++thrown;
      io.restart();
    }
  }
  for (auto& s : submitters) s.join();

  EXPECT_EQ(completed, total);
  EXPECT_EQ(thrown, (total + every - 1) / every);
  EXPECT_EQ(wrong_thread, 0);
  EXPECT_EQ(degraded, 0);
  EXPECT_EQ(destroyed.destroyed.load(), total);
  EXPECT_EQ(destroyed.elsewhere.load(), 0);
  for (int k = 0; k < keys; ++k) {
    EXPECT_EQ(admitted[static_cast<std::size_t>(k)], static_cast<int>(capacity)) << k;
  }
}

// Coalesced: one post per reply (include/sluice/completion.hpp).
TEST(RedisCompletionTest, ConcurrentChecksBoundToAnIoContextCompleteOnceEachOnItsThread) {
  boost::asio::io_context io(1);
  expect_each_completes_once_on_its_thread(io, io.get_executor());
}

// Not coalesced: one post per check, each to the strand.
TEST(RedisCompletionTest, ConcurrentChecksBoundToAStrandCompleteOnceEachOnItsThread) {
  boost::asio::io_context io(1);
  expect_each_completes_once_on_its_thread(io, boost::asio::make_strand(io));
}

// Counts the operations `io` runs to complete `total` checks issued at once from this thread
// with their handlers bound to `bind_to`; every check must be admitted, once.
template <class Executor>
std::size_t operations_to_complete(boost::asio::io_context& io, Executor bind_to, int total) {
  test::redis_server redis;
  redis_options o;
  o.url = redis.url();
  o.command_timeout = 10s;
  o.max_batch = 32;
  limiter lim(make_redis_backend(o.url, o));
  policy p;
  p.capacity = 1000;
  p.refill_per_second = 0.001;
  p.on_failure = failure_mode::closed;

  auto work = boost::asio::make_work_guard(io);
  int admitted = 0;
  int completed = 0;
  for (int i = 0; i < total; ++i) {
    lim.async_check("grouped:" + std::to_string(i % 7), p, 1,
                    boost::asio::bind_executor(bind_to, [&](std::error_code ec, decision d) {
                      EXPECT_FALSE(ec);
                      if (d.allowed && !d.degraded) ++admitted;
                      if (++completed == total) work.reset();
                    }));
  }
  std::size_t operations = 0;
  while (io.run_one() > 0) ++operations;  // returns 0 once the last handler reset `work`
  EXPECT_EQ(completed, total);
  EXPECT_EQ(admitted, total);
  return operations;
}

// What the grouping buys: the checks that one reply answers (up to max_batch of them) reach
// the io_context as one operation, so its thread wakes once per reply, not once per check.
// A lone check goes out at once and the rest queue behind it, so 300 checks issued in a burst
// come back in a handful of replies; one post per check would take 300 operations.
TEST(RedisCompletionTest, ChecksAnsweredByOneReplyCompleteAsOneOperation) {
  constexpr int total = 300;
  boost::asio::io_context io(1);
  EXPECT_LT(operations_to_complete(io, io.get_executor(), total),
            static_cast<std::size_t>(total / 2));
}

// The same through a type-erased executor (as use_awaitable and Beast streams hand out).
TEST(RedisCompletionTest, ChecksBoundToAnAnyIoExecutorAreGroupedToo) {
  constexpr int total = 300;
  boost::asio::io_context io(1);
  const boost::asio::any_io_executor ex = io.get_executor();
  EXPECT_LT(operations_to_complete(io, ex, total), static_cast<std::size_t>(total / 2));
}

}  // namespace
