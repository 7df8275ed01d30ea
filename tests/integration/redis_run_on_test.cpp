// redis_options::run_on: the backend's connection on the caller's io_context, no I/O thread
// of its own. Against a real redis-server: exact under many concurrent checks from that
// loop and from other threads, never waiting for itself, and serving again after restarts.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include <sluice/error.hpp>
#include <sluice/limiter.hpp>
#include <sluice/redis_backend.hpp>

#include "support/redis_server.hpp"

namespace {

using namespace sluice;
using namespace std::chrono_literals;
namespace asio = boost::asio;

constexpr int keys = 10;
constexpr std::uint64_t capacity = 100;

policy bucket() {
  policy p;
  p.capacity = capacity;
  p.refill_per_second = 0.001;
  p.on_failure = failure_mode::closed;
  return p;
}

redis_options options_on(asio::io_context& io, const std::string& url) {
  redis_options o;
  o.url = url;
  o.command_timeout = 2s;
  o.connect_timeout = 500ms;
  o.reconnect_backoff_min = 10ms;
  o.reconnect_backoff_max = 100ms;
  o.run_on = &io;
  return o;
}

// The io_context run by one thread of its own, as a server's event loop.
struct loop_thread {
  asio::io_context io{1};
  asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
  std::thread thread{[this] { io.run(); }};
  ~loop_thread() { stop(); }
  void stop() {
    work.reset();
    io.stop();
    if (thread.joinable()) thread.join();
  }
};

// Waits (on the test thread) until a check on `lim` is decided by Redis.
void wait_until_up(limiter& lim, const std::string& probe_key) {
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (lim.check(probe_key, bucket()).degraded) {
    ASSERT_LT(std::chrono::steady_clock::now(), until) << "Redis never answered";
    std::this_thread::sleep_for(10ms);
  }
}

TEST(RedisRunOnTest, ConcurrentChecksFromTheLoopAndFromOtherThreadsStayExact) {
  test::redis_server redis;
  std::array<std::atomic<int>, keys> admitted{};
  std::atomic<int> degraded{0};
  std::atomic<int> chain_checks{0};
  {
    // The io_context outlives the limiter that runs on it.
    loop_thread loop;
    std::function<void(int, int)> issue;
    limiter lim(make_redis_backend(redis.url(), options_on(loop.io, redis.url())));
    wait_until_up(lim, "probe");

    // 40 chains of async_check on the loop, each issuing its next check from the previous
    // one's completion (the checks pile into batches), 50 checks per chain...
    std::atomic<int> chains_left{40};
    issue = [&](int c, int i) {
      const int k = (c + i) % keys;
      lim.async_check("exact:" + std::to_string(k), bucket(), 1,
                      asio::bind_executor(loop.io, [&, c, i, k](std::error_code ec, decision d) {
                        EXPECT_FALSE(ec);
                        if (d.allowed) ++admitted[static_cast<std::size_t>(k)];
                        if (d.degraded) ++degraded;
                        ++chain_checks;
                        if (i + 1 < 50) return issue(c, i + 1);
                        --chains_left;
                      }));
    };
    asio::post(loop.io, [&] {
      for (int c = 0; c < 40; ++c) issue(c, 0);
    });
    // ...while 4 other threads make 50 blocking checks each on the same keys.
    std::vector<std::thread> others;
    for (int t = 0; t < 4; ++t) {
      others.emplace_back([&, t] {
        for (int i = 0; i < 50; ++i) {
          const int k = (t * 3 + i) % keys;
          const auto d = lim.check("exact:" + std::to_string(k), bucket());
          if (d.allowed) ++admitted[static_cast<std::size_t>(k)];
          if (d.degraded) ++degraded;
        }
      });
    }
    for (auto& t : others) t.join();
    const auto until = std::chrono::steady_clock::now() + 30s;
    while (chains_left.load() > 0 && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(5ms);
    }
    const int unfinished = chains_left.load();
    if (unfinished > 0) loop.stop();  // no handler may run once this scope is left
    ASSERT_EQ(unfinished, 0) << "some chains never completed";
  }
  EXPECT_EQ(chain_checks.load(), 40 * 50);
  EXPECT_EQ(degraded.load(), 0);
  // 2200 checks over 10 keys of capacity 100: each key admitted exactly its capacity.
  for (int k = 0; k < keys; ++k) {
    EXPECT_EQ(admitted[static_cast<std::size_t>(k)].load(), static_cast<int>(capacity)) << k;
  }
}

TEST(RedisRunOnTest, ABlockingCheckOnTheLoopThreadFailsAtOnceInsteadOfWaitingForItself) {
  test::redis_server redis;
  std::promise<decision> on_loop;  // outlives the loop's handler, whatever fails below
  loop_thread loop;
  limiter lim(make_redis_backend(redis.url(), options_on(loop.io, redis.url())));
  wait_until_up(lim, "probe");
  const auto t0 = std::chrono::steady_clock::now();
  asio::post(loop.io, [&] { on_loop.set_value(lim.check("self", bucket())); });
  auto f = on_loop.get_future();
  ASSERT_EQ(f.wait_for(5s), std::future_status::ready) << "the loop waited for itself";
  const auto d = f.get();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);
  EXPECT_TRUE(d.degraded);
  EXPECT_EQ(d.backend_error, make_error_code(errc::backend_unavailable));
  EXPECT_FALSE(d.allowed) << "the policy fails closed";
  // The same check from another thread is decided by Redis.
  EXPECT_FALSE(lim.check("self", bucket()).degraded);
}

TEST(RedisRunOnTest, ServesAgainAfterRedisRestarts) {
  test::redis_server redis;
  loop_thread loop;
  limiter lim(make_redis_backend(redis.url(), options_on(loop.io, redis.url())));
  wait_until_up(lim, "probe");
  redis.restart();  // every key lost (the reconnection loads the scripts again)
  std::this_thread::sleep_for(100ms);
  redis.kill();
  std::this_thread::sleep_for(100ms);
  const auto down = lim.check("down", bucket());
  EXPECT_TRUE(down.degraded);
  redis.start();
  wait_until_up(lim, "after:probe");
  std::atomic<int> admitted{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < 10; ++t) {
    pool.emplace_back([&] {
      for (int i = 0; i < 20; ++i) admitted += lim.check("after:exact", bucket()).allowed ? 1 : 0;
    });
  }
  for (auto& t : pool) t.join();
  EXPECT_EQ(admitted.load(), static_cast<int>(capacity));
}

TEST(RedisRunOnTest, ClusterAndSentinelUrlsRefuseIt) {
  asio::io_context io;
  for (const char* url :
       {"redis+cluster://127.0.0.1:7000", "redis+sentinel://127.0.0.1:26379/mymaster"}) {
    auto o = options_on(io, url);
    EXPECT_THROW(make_redis_backend(o.url, o), std::invalid_argument) << url;
    o.run_on = nullptr;
    EXPECT_NO_THROW(make_redis_backend(o.url, o)) << url;
  }
}

}  // namespace
