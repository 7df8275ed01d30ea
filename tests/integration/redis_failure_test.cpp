// Failure modes through sluice::limiter on a real outage, for each mode (open, closed,
// local): nothing listening, Redis killed mid-test, a server that accepts but never
// answers, a SIGSTOP'ed Redis. Every check returns within the command timeout plus a
// generous margin (a hang detector, not a speed test), is degraded with the mode's answer,
// and is counted; while Redis is known down, checks fail fast (backend_unavailable, not a
// timeout each); recovery needs no new backend.
#include <sluice/error.hpp>
#include <sluice/limiter.hpp>
#include <sluice/redis_backend.hpp>

#include <chrono>
#include <future>
#include <thread>

#include <gtest/gtest.h>

#include "support/black_hole_server.hpp"
#include "support/loopback.hpp"
#include "support/redis_server.hpp"

namespace {

using namespace sluice;
using namespace std::chrono_literals;

constexpr auto command_timeout = 100ms;
constexpr auto hang_bound = command_timeout + 2s;
constexpr std::uint64_t capacity = 5;
constexpr int outage_checks = 30;

class RedisFailureTest : public ::testing::TestWithParam<failure_mode> {
 protected:
  policy bucket() const {
    policy p;
    p.capacity = capacity;
    p.refill_per_second = 0.001;  // the local fallback's answers stay predictable
    p.on_failure = GetParam();
    return p;
  }

  static limiter make_limiter(const std::string& url) {
    redis_options o;
    o.url = url;
    o.command_timeout = command_timeout;
    o.connect_timeout = 200ms;
    o.reconnect_backoff_min = 10ms;
    o.reconnect_backoff_max = 200ms;
    return limiter(make_redis_backend(o.url, o));
  }

  decision timed_check(limiter& lim, const std::string& key) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto d = lim.check(key, bucket());
    const auto took = std::chrono::steady_clock::now() - t0;
    longest_ = std::max(longest_, took);
    EXPECT_LT(took, hang_bound) << "a check hung";
    return d;
  }

  // `n` checks on a fresh key during an outage: all degraded, with the mode's answer.
  void expect_degraded_checks(limiter& lim, const std::string& key, int n) {
    for (int i = 0; i < n; ++i) {
      const auto d = timed_check(lim, key);
      ASSERT_TRUE(d.degraded) << "check " << i;
      ASSERT_TRUE(is_backend_error(d.backend_error)) << d.backend_error.message();
      ++degraded_;
      if (d.backend_error == errc::backend_timeout) ++timeouts_;
      EXPECT_EQ(d.limit, capacity);
      switch (GetParam()) {
        case failure_mode::open:
          EXPECT_TRUE(d.allowed);
          break;
        case failure_mode::closed:
          EXPECT_FALSE(d.allowed);
          EXPECT_GT(d.retry_after, 0ms);
          break;
        case failure_mode::local:  // the in-process bucket: the capacity, then denials
          EXPECT_EQ(d.allowed, i < static_cast<int>(capacity)) << "check " << i;
          break;
      }
    }
  }

  void expect_counted(const limiter& lim) const {
    const auto s = lim.stats();
    const auto want = static_cast<std::uint64_t>(degraded_);
    EXPECT_EQ(s.backend_errors, want);
    EXPECT_EQ(s.degraded_open, GetParam() == failure_mode::open ? want : 0);
    EXPECT_EQ(s.degraded_closed, GetParam() == failure_mode::closed ? want : 0);
    EXPECT_EQ(s.degraded_local, GetParam() == failure_mode::local ? want : 0);
  }

  // Once Redis is back, the same limiter decides with it again (polls up to 10 s).
  void expect_recovery(limiter& lim, const std::string& key) {
    const auto until = std::chrono::steady_clock::now() + 10s;
    decision d;
    do {
      d = timed_check(lim, key);
      if (d.degraded) {
        ++degraded_;
        std::this_thread::sleep_for(10ms);
      }
    } while (d.degraded && std::chrono::steady_clock::now() < until);
    ASSERT_FALSE(d.degraded) << "no recovery: " << d.backend_error.message();
    const auto next = timed_check(lim, key);
    EXPECT_FALSE(next.degraded);
    EXPECT_TRUE(next.allowed);
    EXPECT_EQ(next.remaining, d.remaining - 1);
  }

  void expect_healthy(limiter& lim, const std::string& key) {
    const auto d = timed_check(lim, key);
    ASSERT_FALSE(d.degraded) << d.backend_error.message();
    EXPECT_TRUE(d.allowed);
    EXPECT_EQ(d.remaining, capacity - 1);
  }

  void TearDown() override {
    std::printf("longest check: %.1f ms, %d degraded (%d timeouts)\n",
                std::chrono::duration<double, std::milli>(longest_).count(), degraded_, timeouts_);
  }

  int degraded_ = 0;
  int timeouts_ = 0;
  std::chrono::steady_clock::duration longest_{};
};

TEST_P(RedisFailureTest, NothingListening) {
  auto lim = make_limiter("redis://127.0.0.1:" + std::to_string(test::free_loopback_port()));
  expect_degraded_checks(lim, "down", outage_checks);
  // A refused connection is known at once: no call waits for a timeout.
  EXPECT_EQ(timeouts_, 0);
  expect_counted(lim);
}

TEST_P(RedisFailureTest, RedisKilledMidTestThenBack) {
  test::redis_server redis;
  auto lim = make_limiter(redis.url());
  expect_healthy(lim, "before");
  redis.kill();
  expect_degraded_checks(lim, "during", outage_checks);
  EXPECT_LE(timeouts_, 1);
  // The async path lands in the mode too.
  std::promise<decision> async_result;
  lim.async_check("during-async", bucket(), 1,
                  [&](std::error_code, decision d) { async_result.set_value(d); });
  auto fut = async_result.get_future();
  ASSERT_EQ(fut.wait_for(hang_bound), std::future_status::ready);
  const auto ad = fut.get();
  EXPECT_TRUE(ad.degraded);
  ++degraded_;
  expect_counted(lim);
  redis.start();
  expect_recovery(lim, "after");
  expect_counted(lim);
}

TEST_P(RedisFailureTest, ServerAcceptsButNeverAnswers) {
  test::black_hole_server hole;
  auto lim = make_limiter(hole.url());
  expect_degraded_checks(lim, "hole", outage_checks);
  // The handshake times out once; after that the breaker is open: no timeout per call.
  EXPECT_LE(timeouts_, 3);
  EXPECT_GE(hole.accepted(), 1u);
  expect_counted(lim);
}

TEST_P(RedisFailureTest, StoppedRedisThenResumed) {
  test::redis_server redis;
  auto lim = make_limiter(redis.url());
  expect_healthy(lim, "before");
  redis.pause();
  expect_degraded_checks(lim, "during", outage_checks);
  // One call finds the connection stuck; reconnecting finds the server silent: fail fast.
  EXPECT_LE(timeouts_, 3);
  expect_counted(lim);
  redis.resume();
  expect_recovery(lim, "after");
  expect_counted(lim);
}

INSTANTIATE_TEST_SUITE_P(Modes, RedisFailureTest,
                         ::testing::Values(failure_mode::open, failure_mode::closed,
                                           failure_mode::local),
                         [](const auto& info) { return std::string(to_string(info.param)); });

}  // namespace
