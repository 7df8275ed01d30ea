// The auto-pipelined path under concurrency: many threads and many outstanding async checks
// share one connection and stay exact; a Redis restart mid-load crashes nothing, hangs
// nothing, completes every call, and the same backend serves again afterwards.
#include <sluice/limiter.hpp>
#include <sluice/redis_backend.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "support/redis_server.hpp"

namespace {

using namespace sluice;
using namespace std::chrono_literals;

constexpr int keys = 20;
constexpr std::uint64_t capacity = 100;

policy bucket() {
  policy p;
  p.capacity = capacity;
  p.refill_per_second = 0.001;
  p.on_failure = failure_mode::closed;
  return p;
}

limiter make_limiter(const std::string& url, std::chrono::milliseconds timeout,
                     std::chrono::microseconds poll_before_sleep = std::chrono::microseconds{50}) {
  redis_options o;
  o.url = url;
  o.poll_before_sleep = poll_before_sleep;
  o.command_timeout = timeout;
  o.connect_timeout = 500ms;
  o.reconnect_backoff_min = 10ms;
  o.reconnect_backoff_max = 100ms;
  return limiter(make_redis_backend(o.url, o));
}

std::string key_name(const std::string& prefix, int k) { return prefix + std::to_string(k); }

// Counts completions of async checks and waits for all of them, with a bound.
class completion_counter {
 public:
  void submitted() {
    std::lock_guard lock(mu_);
    ++submitted_;
  }
  void completed() {
    std::lock_guard lock(mu_);
    ++completed_;
    cv_.notify_all();
  }
  std::uint64_t outstanding() {
    std::lock_guard lock(mu_);
    return submitted_ - completed_;
  }
  bool wait_all(std::chrono::seconds within) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, within, [&] { return completed_ == submitted_; });
  }
  void wait_below(std::uint64_t n) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return submitted_ - completed_ < n; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::uint64_t submitted_ = 0, completed_ = 0;
};

// 50 threads calling the blocking check on 10 keys: each key admits exactly its capacity.
void expect_many_threads_exact(std::chrono::microseconds poll_before_sleep) {
  test::redis_server redis;
  auto lim = make_limiter(redis.url(), 10s, poll_before_sleep);
  std::array<std::atomic<int>, keys> admitted{};
  std::atomic<int> degraded{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < 50; ++t) {
    pool.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        const int k = (t + i) % keys;
        const auto d = lim.check(key_name("threads:", k), bucket());
        if (d.allowed) ++admitted[k];
        if (d.degraded) ++degraded;
      }
    });
  }
  for (auto& t : pool) t.join();
  EXPECT_EQ(degraded.load(), 0);
  for (int k = 0; k < keys; ++k) EXPECT_EQ(admitted[k].load(), static_cast<int>(capacity)) << k;
}

TEST(RedisPipelineTest, ManyThreadsStayExact) { expect_many_threads_exact(50us); }

// The I/O thread that sleeps in epoll_wait at once (no polling) runs another loop.
TEST(RedisPipelineTest, ManyThreadsStayExactWithoutPolling) { expect_many_threads_exact(0us); }

TEST(RedisPipelineTest, ThousandsOfOutstandingAsyncChecksStayExact) {
  test::redis_server redis;
  auto lim = make_limiter(redis.url(), 10s);
  std::array<std::atomic<int>, keys> admitted{};
  std::atomic<int> degraded{0};
  completion_counter done;
  std::vector<std::thread> submitters;
  for (int t = 0; t < 4; ++t) {
    submitters.emplace_back([&, t] {
      for (int i = 0; i < 2500; ++i) {  // no waiting: these pile into pipelines
        const int k = (t * 7 + i) % keys;
        done.submitted();
        lim.async_check(key_name("async:", k), bucket(), 1, [&, k](std::error_code ec, decision d) {
          EXPECT_FALSE(ec);
          if (d.allowed) ++admitted[k];
          if (d.degraded) ++degraded;
          done.completed();
        });
      }
    });
  }
  // A blocking caller in the middle of it all shares the same pipelines.
  for (int i = 0; i < 200; ++i) {
    const int k = i % keys;
    const auto d = lim.check(key_name("async:", k), bucket());
    if (d.allowed) ++admitted[k];
    if (d.degraded) ++degraded;
  }
  for (auto& t : submitters) t.join();
  ASSERT_TRUE(done.wait_all(60s)) << done.outstanding() << " async checks never completed";
  EXPECT_EQ(degraded.load(), 0);
  for (int k = 0; k < keys; ++k) EXPECT_EQ(admitted[k].load(), static_cast<int>(capacity)) << k;
}

TEST(RedisPipelineTest, SurvivesRedisRestartsMidLoad) {
  test::redis_server redis;
  constexpr auto timeout = 500ms;
  auto lim = make_limiter(redis.url(), timeout);
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> blocking_calls{0}, degraded{0};
  std::atomic<std::int64_t> longest_us{0};
  completion_counter async_done;

  std::vector<std::thread> pool;
  for (int t = 0; t < 16; ++t) {
    pool.emplace_back([&, t] {
      for (int i = 0; !stop.load(); ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        const auto d = lim.check(key_name("load:", (t + i) % keys), bucket());
        const auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                            std::chrono::steady_clock::now() - t0)
                            .count();
        std::int64_t prev = longest_us.load();
        while (us > prev && !longest_us.compare_exchange_weak(prev, us)) {
        }
        ++blocking_calls;
        if (d.degraded) ++degraded;
      }
    });
  }
  for (int t = 0; t < 2; ++t) {
    pool.emplace_back([&, t] {
      for (int i = 0; !stop.load(); ++i) {
        async_done.wait_below(500);  // keep many in flight, not unboundedly many
        async_done.submitted();
        lim.async_check(key_name("load-async:", (t + i) % keys), bucket(), 1,
                        [&](std::error_code, decision d) {
                          if (d.degraded) ++degraded;
                          async_done.completed();
                        });
      }
    });
  }

  std::this_thread::sleep_for(300ms);
  redis.restart();
  std::this_thread::sleep_for(400ms);
  redis.kill();
  std::this_thread::sleep_for(100ms);
  redis.start();
  std::this_thread::sleep_for(400ms);
  stop = true;
  for (auto& t : pool) t.join();
  ASSERT_TRUE(async_done.wait_all(30s)) << async_done.outstanding() << " async checks hung";
  std::printf("%llu blocking calls, %llu degraded, longest %.1f ms\n",
              static_cast<unsigned long long>(blocking_calls.load()),
              static_cast<unsigned long long>(degraded.load()), longest_us.load() / 1000.0);
  EXPECT_GT(degraded.load(), 0u) << "the restarts went unnoticed?";
  EXPECT_LT(std::chrono::microseconds{longest_us.load()}, timeout + 2s) << "a call hung";

  // The same limiter serves again, and exactly.
  const auto until = std::chrono::steady_clock::now() + 10s;
  decision d;
  do {
    d = lim.check("after:probe", bucket());
  } while (d.degraded && std::chrono::steady_clock::now() < until);
  ASSERT_FALSE(d.degraded);
  std::atomic<int> admitted{0};
  std::vector<std::thread> after;
  for (int t = 0; t < 20; ++t) {
    after.emplace_back([&] {
      for (int i = 0; i < 10; ++i) admitted += lim.check("after:exact", bucket()).allowed ? 1 : 0;
    });
  }
  for (auto& t : after) t.join();
  EXPECT_EQ(admitted.load(), static_cast<int>(capacity));
}

}  // namespace
