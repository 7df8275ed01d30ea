// The cluster backend when no cluster answers: refused seeds, a seed that accepts and never
// answers, and destruction with calls in flight. Every call ends with a backend error
// within the command timeout; nothing hangs.
#include <gtest/gtest.h>

#include <sluice/error.hpp>
#include <sluice/redis_cluster.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "support/black_hole_server.hpp"
#include "support/loopback.hpp"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

policy bucket() {
  policy p;
  p.capacity = 10;
  p.refill_per_second = 1;
  return p;
}

TEST(ClusterFailureTest, RefusedSeedsFailFastWithBackendErrors) {
  redis_options o;
  o.url = "redis+cluster://127.0.0.1:" + std::to_string(free_loopback_port()) +
          ",127.0.0.1:" + std::to_string(free_loopback_port());
  o.command_timeout = 100ms;
  auto b = make_redis_backend(o.url, o);
  for (int i = 0; i < 50; ++i) {
    decision d;
    const auto start = steady::now();
    const auto ec = b->decide("k" + std::to_string(i), bucket(), 1, d);
    EXPECT_TRUE(is_backend_error(ec)) << ec.message();
    EXPECT_LT(steady::now() - start, o.command_timeout + 500ms);
  }
}

TEST(ClusterFailureTest, SilentSeedTimesOutWithinTheCommandTimeout) {
  black_hole_server hole;
  redis_options o;
  o.url = "redis+cluster://127.0.0.1:" + std::to_string(hole.port());
  o.command_timeout = 100ms;
  o.connect_timeout = 100ms;
  auto b = make_redis_backend(o.url, o);
  for (int i = 0; i < 5; ++i) {
    decision d;
    const auto start = steady::now();
    const auto ec = b->decide("k", bucket(), 1, d);
    const auto took = steady::now() - start;
    EXPECT_TRUE(ec == errc::backend_timeout || ec == errc::backend_unavailable) << ec.message();
    EXPECT_LT(took, o.command_timeout + 500ms);
  }
  EXPECT_GT(hole.accepted(), 0u);
}

TEST(ClusterFailureTest, DestroyedWithCallsInFlightCompletesThemAll) {
  black_hole_server hole;
  redis_options o;
  o.url = "redis+cluster://127.0.0.1:" + std::to_string(hole.port());
  o.command_timeout = 10s;  // only the destruction can end these calls in time
  o.connect_timeout = 10s;
  auto b = make_redis_backend(o.url, o);
  std::mutex mu;
  std::condition_variable cv;
  int done = 0;
  std::atomic<int> shutting_down{0};
  for (int i = 0; i < 100; ++i) {
    b->async_decide("k" + std::to_string(i), bucket(), 1, [&](std::error_code ec, decision) {
      if (ec == errc::backend_shutting_down) ++shutting_down;
      std::lock_guard lock(mu);
      ++done;
      cv.notify_one();
    });
  }
  const auto start = steady::now();
  b.reset();
  std::unique_lock lock(mu);
  ASSERT_TRUE(cv.wait_for(lock, 5s, [&] { return done == 100; })) << done << " of 100";
  EXPECT_EQ(shutting_down.load(), 100);
  EXPECT_LT(steady::now() - start, 5s);
}

}  // namespace
}  // namespace sluice::test
