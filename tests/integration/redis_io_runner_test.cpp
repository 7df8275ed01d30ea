// Who runs a Redis backend's I/O (src/redis/engine/io_runner.hpp): a thread of its own that
// finish() ends and joins, or detaches when a backend is destroyed on that very thread; or
// the caller's io_context, which it never runs itself. Threads, no servers.
#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <thread>

#include <gtest/gtest.h>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "redis/engine/io_runner.hpp"

namespace {

using sluice::redis::io_runner;
using namespace std::chrono_literals;

TEST(RedisIoRunnerTest, OwnThreadRunsPostedWorkAndFinishRunsWhatWasPostedThenJoins) {
  auto r = io_runner::own("test");
  EXPECT_TRUE(r->owns_thread());
  r->start();
  std::promise<bool> on_thread;
  boost::asio::post(r->io(), [&] { on_thread.set_value(r->on_io_thread()); });
  EXPECT_TRUE(on_thread.get_future().get());
  EXPECT_FALSE(r->on_io_thread());
  // Posted before finish(): it still runs before the thread ends.
  std::atomic<bool> ran{false};
  boost::asio::post(r->io(), [&] { ran = true; });
  r->finish();
  EXPECT_TRUE(ran.load());
  r->finish();  // idempotent
}

TEST(RedisIoRunnerTest, FinishedOnItsOwnThreadItDetachesAndTheThreadFreesIt) {
  auto r = io_runner::own("test");
  r->start();
  std::weak_ptr<io_runner> weak = r;
  std::promise<void> finished;
  // As a backend whose last owner is released in a completion handler: the runner is
  // finished from its own thread, and nobody else holds it.
  auto& io = r->io();  // before r moves into the handler
  // The handler waits until post() has returned here: post() wakes the thread and may still
  // be touching the io_context when the handler runs, and the handler's end frees it.
  std::promise<void> posted;
  auto posted_f = posted.get_future();
  boost::asio::post(io, [r = std::move(r), &finished, &posted_f]() mutable {
    posted_f.wait();
    r->finish();  // would deadlock (or throw) if it joined itself
    r.reset();
    finished.set_value();
  });
  posted.set_value();
  ASSERT_EQ(finished.get_future().wait_for(10s), std::future_status::ready);
  // The thread ends on its own and drops the last reference.
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (!weak.expired() && std::chrono::steady_clock::now() < until) std::this_thread::yield();
  EXPECT_TRUE(weak.expired());
}

TEST(RedisIoRunnerTest, ABorrowedIoContextIsRunByItsOwnerOnly) {
  boost::asio::io_context io(1);
  auto r = io_runner::borrowed(io);
  EXPECT_FALSE(r->owns_thread());
  r->start();  // no thread
  bool on_thread = false;
  boost::asio::post(io, [&] { on_thread = r->on_io_thread(); });
  EXPECT_FALSE(r->on_io_thread());
  EXPECT_EQ(io.run(), 1u);  // the handler was still queued: nobody else ran it
  EXPECT_TRUE(on_thread);
  r->finish();  // nothing to end
  EXPECT_EQ(&r->io(), &io);
}

TEST(RedisIoRunnerTest, NeverStartedFinishesWithoutAThread) {
  auto r = io_runner::own("test");
  r->finish();
  EXPECT_FALSE(r->on_io_thread());
}

}  // namespace
