// Issue 34's big test on a real redis-server: 200 callers in 2 forked processes (100
// asynchronous callers each, on one io_context), limit 20, 10^6 acquire calls in all with
// random hold times: the number in flight, counted by the callers themselves in memory
// both processes share, never exceeds 20; every slot is released (the key's sorted set is
// empty afterwards). Leases are long (60 s), so only releases free slots during the run.
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <random>
#include <string>
#include <thread>
#include <utility>  // before Boost 1.74's awaitable.hpp, which uses std::exchange

#include <gtest/gtest.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <sluice/concurrency.hpp>
#include <sluice/limiter.hpp>
#include <sluice/redis_backend.hpp>

#include "support/redis_client.hpp"
#include "support/redis_server.hpp"

namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using sluice::concurrency_policy;

constexpr int processes = 2;
constexpr int callers_per_process = 100;
constexpr std::uint64_t acquisitions = 1'000'000;
constexpr int limit = 20;

// In a MAP_SHARED page created before fork(): the callers of both processes count here.
// std::atomic on shared memory is fine for lock-free integers (static_assert below).
struct shared_counts {
  std::atomic<std::uint64_t> started{0};  // acquire calls begun, both processes
  std::atomic<int> in_flight{0};
  std::atomic<int> most{0};
  std::atomic<std::uint64_t> acquired{0}, refused{0}, errors{0};
};
static_assert(std::atomic<std::uint64_t>::is_always_lock_free);
static_assert(std::atomic<int>::is_always_lock_free);

asio::awaitable<void> caller(sluice::limiter& lim, const concurrency_policy& p, shared_counts& c,
                             unsigned seed) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  std::minstd_rand rng(seed);
  // Holds of 0..200 us: random, and short enough that 10^6 calls fit in a test's time.
  std::uniform_int_distribution<int> hold_us(0, 200);
  boost::system::error_code ignored;
  while (c.started.fetch_add(1) < acquisitions) {
    // Boost 1.74 hands a std::error_code back in the tuple (it throws only its own).
    auto [invalid, s] = co_await lim.async_try_acquire("tenant", p, asio::use_awaitable);
    if (invalid || s.degraded()) c.errors.fetch_add(1);
    if (s) {
      c.acquired.fetch_add(1);
      const int now = c.in_flight.fetch_add(1) + 1;
      int seen = c.most.load();
      while (now > seen && !c.most.compare_exchange_weak(seen, now)) {
      }
    } else {
      c.refused.fetch_add(1);
    }
    // The work while holding, or a pause before trying again when refused.
    timer.expires_after(std::chrono::microseconds{hold_us(rng)});
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ignored));
    if (s) {
      // Counted out before the release is sent: the count never lags the server's.
      c.in_flight.fetch_sub(1);
      if (co_await s.async_release(asio::use_awaitable)) c.errors.fetch_add(1);
    }
  }
}

// One process's callers, until the shared count of acquire calls is reached. Every
// release has been answered when this returns.
void run_callers(const std::string& url, int process, shared_counts& c) {
  sluice::redis_options o;
  o.command_timeout = 5000ms;  // checks answers, not speed: CI machines stall
  o.connect_timeout = 5000ms;
  auto lim = sluice::limiter_from_url(url, o);
  const concurrency_policy p{
      .limit = limit, .lease_ttl = 60s, .on_failure = sluice::failure_mode::closed};
  asio::io_context io;
  for (int i = 0; i < callers_per_process; ++i) {
    asio::co_spawn(io, caller(lim, p, c, static_cast<unsigned>(process * 1000 + i)),
                   asio::detached);
  }
  io.run();
}

TEST(RedisSlotsLoadTest, TwoHundredCallersInTwoProcessesNeverHoldMoreThanTheLimit) {
  sluice::test::redis_server redis;
  void* page = mmap(nullptr, sizeof(shared_counts), PROT_READ | PROT_WRITE,
                    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(page, MAP_FAILED);
  auto* c = new (page) shared_counts;
  pid_t kids[processes];
  for (int i = 0; i < processes; ++i) {
    kids[i] = fork();
    ASSERT_GE(kids[i], 0) << "fork";
    if (kids[i] == 0) {
      run_callers(redis.url(), i, *c);
      _exit(0);
    }
  }
  for (const pid_t pid : kids) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  }
  EXPECT_EQ(c->errors.load(), 0u);
  EXPECT_EQ(c->acquired.load() + c->refused.load(), acquisitions);
  EXPECT_LE(c->most.load(), limit);
  EXPECT_EQ(c->most.load(), limit) << "the limit was reached (else nothing was tested)";
  EXPECT_GT(c->refused.load(), 0u);
  EXPECT_EQ(c->in_flight.load(), 0);
  // Every release was answered before the processes ended: no holder is left on Redis.
  sluice::test::redis_client admin(redis.port());
  const auto keys = admin.command({"KEYS", "*tenant*"});
  ASSERT_EQ(keys->type, REDIS_REPLY_ARRAY);
  for (std::size_t i = 0; i < keys->elements; ++i) {
    const std::string key(keys->element[i]->str, keys->element[i]->len);
    const auto n = admin.command({"ZCARD", key});
    EXPECT_EQ(n->integer, 0) << key << " still has holders";
  }
  std::printf("acquire calls=%llu acquired=%llu refused=%llu most in flight=%d\n",
              static_cast<unsigned long long>(acquisitions),
              static_cast<unsigned long long>(c->acquired.load()),
              static_cast<unsigned long long>(c->refused.load()), c->most.load());
  c->~shared_counts();
  munmap(page, sizeof(shared_counts));
}

}  // namespace
