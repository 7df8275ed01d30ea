// sluice_bench_slots_redis: acquire and release latency of concurrency limits on a Redis
// backend (issue 34's target: acquire + release p99 under 1 ms at 200 callers on loopback).
// Written as a user with 200 concurrent callers would write it on the public API: 200
// coroutines on one io_context (one thread by default), each in a loop: take a slot of one
// of K keys with limiter::async_try_acquire (limit high enough that all are admitted), hold
// it for a random time, uniform in [hold-min-us, hold-max-us] (default 1..10 ms), give it
// back with slot::async_release, and time both calls. The backend runs its own I/O thread
// (the default), or with --run-on, on the callers' io_context. After a warm-up second, it
// prints one line of `name=value` fields: p50/p99/p999 of the acquire call, of the release
// call and of the two summed (per pair), in microseconds, pairs per second, and the script
// calls the backend sent in the whole run, warm-up included (slot steps waiting together
// share one: about 2 x pairs x (seconds + 1) / seconds steps went in them).
//
//   sluice_bench_slots_redis --url redis://127.0.0.1:PORT [--callers 200] [--keys 1000]
//       [--seconds 5] [--hold-min-us 1000] [--hold-max-us 10000] [--threads 1] [--run-on]
//       [--poll-us N]   (redis_options::poll_before_sleep; unset: the library's default)
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <utility>  // before Boost 1.74's awaitable.hpp, which uses std::exchange
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <sluice/concurrency.hpp>
#include <sluice/limiter.hpp>
#include <sluice/redis_backend.hpp>

namespace {

namespace asio = boost::asio;
using steady = std::chrono::steady_clock;
using std::chrono::microseconds;

const char* arg(int argc, char** argv, const char* name, const char* fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], name) == 0) return argv[i + 1];
  }
  return fallback;
}

bool flag(int argc, char** argv, const char* name) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], name) == 0) return true;
  }
  return false;
}

struct sample {
  std::uint32_t acquire_us;
  std::uint32_t release_us;
};

struct run {
  sluice::limiter* lim;
  sluice::concurrency_policy policy;
  int keys;
  int hold_min_us;
  int hold_max_us;
  steady::time_point measure_from;  // after the warm-up
  steady::time_point until;
  std::atomic<std::uint64_t> failures{0};
  std::atomic<int> live{0};  // callers still running
  asio::io_context* io = nullptr;
};

std::uint32_t us_since(steady::time_point t) {
  return static_cast<std::uint32_t>(
      std::chrono::duration_cast<microseconds>(steady::now() - t).count());
}

asio::awaitable<void> caller(run& r, unsigned seed, std::vector<sample>& out) {
  auto ex = co_await asio::this_coro::executor;
  asio::steady_timer timer(ex);
  std::minstd_rand rng(seed);
  std::uniform_int_distribution<int> pick_key(0, r.keys - 1);
  std::uniform_int_distribution<int> pick_hold(r.hold_min_us, r.hold_max_us);
  while (steady::now() < r.until) {
    const auto key = "slot-bench:" + std::to_string(pick_key(rng));

    const auto t0 = steady::now();
    // Boost 1.74 hands a std::error_code back in the tuple (it throws only its own).
    auto [invalid, s] = co_await r.lim->async_try_acquire(key, r.policy, asio::use_awaitable);
    if (invalid) r.failures.fetch_add(1, std::memory_order_relaxed);
    const auto acquire_us = us_since(t0);
    if (!s || s.degraded()) r.failures.fetch_add(1, std::memory_order_relaxed);
    timer.expires_after(microseconds{pick_hold(rng)});
    boost::system::error_code wait_ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, wait_ec));
    const auto t1 = steady::now();
    const std::error_code ec = co_await s.async_release(asio::use_awaitable);
    const auto release_us = us_since(t1);
    if (ec) r.failures.fetch_add(1, std::memory_order_relaxed);
    if (t0 >= r.measure_from) out.push_back({acquire_us, release_us});
  }
  // The last caller stops the io_context: with --run-on the backend's own work (its
  // connection's reads, health checks) would keep it running.
  if (r.live.fetch_sub(1) == 1) r.io->stop();
}

std::uint32_t at(const std::vector<std::uint32_t>& sorted, double q) {
  if (sorted.empty()) return 0;
  return sorted[std::min(sorted.size() - 1, static_cast<std::size_t>(q * sorted.size()))];
}

}  // namespace

int main(int argc, char** argv) {
  const std::string url = arg(argc, argv, "--url", "");
  if (url.empty()) {
    std::fprintf(stderr,
                 "usage: %s --url redis://HOST:PORT [--callers N] [--keys K] [--seconds S] "
                 "[--hold-min-us A] [--hold-max-us B] [--threads T] [--run-on] [--poll-us N]\n",
                 argv[0]);
    return 2;
  }
  const int callers = std::atoi(arg(argc, argv, "--callers", "200"));
  const int seconds = std::atoi(arg(argc, argv, "--seconds", "5"));
  const int threads = std::max(1, std::atoi(arg(argc, argv, "--threads", "1")));
  asio::io_context io;
  sluice::redis_options o;
  o.command_timeout = std::chrono::milliseconds{1000};
  if (flag(argc, argv, "--run-on")) o.run_on = &io;
  if (const char* poll = arg(argc, argv, "--poll-us", nullptr))
    o.poll_before_sleep = std::chrono::microseconds{std::atoi(poll)};
  auto lim = sluice::limiter_from_url(url, o);
  run r;
  r.lim = &lim;
  r.policy = {.limit = 100'000,
              .lease_ttl = std::chrono::seconds{30},
              .on_failure = sluice::failure_mode::closed};
  r.keys = std::max(1, std::atoi(arg(argc, argv, "--keys", "1000")));
  r.hold_min_us = std::atoi(arg(argc, argv, "--hold-min-us", "1000"));
  r.hold_max_us = std::max(r.hold_min_us, std::atoi(arg(argc, argv, "--hold-max-us", "10000")));
  r.measure_from = steady::now() + std::chrono::seconds{1};
  r.until = r.measure_from + std::chrono::seconds{seconds};
  r.io = &io;
  r.live = callers;
  std::vector<std::vector<sample>> per_caller(static_cast<std::size_t>(callers));
  for (int c = 0; c < callers; ++c) {
    asio::co_spawn(io, caller(r, 0x9e3779b9u + static_cast<unsigned>(c), per_caller[c]),
                   asio::detached);
  }
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back([&] { io.run(); });
  io.run();
  for (auto& th : pool) th.join();

  std::vector<std::uint32_t> acq, rel, pair;
  for (const auto& v : per_caller) {
    for (const auto& s : v) {
      acq.push_back(s.acquire_us);
      rel.push_back(s.release_us);
      pair.push_back(s.acquire_us + s.release_us);
    }
  }
  for (auto* v : {&acq, &rel, &pair}) std::sort(v->begin(), v->end());
  std::printf(
      "callers=%d hold_us=%d..%d pairs=%zu pairs_per_s=%.0f acquire_p50_us=%u acquire_p99_us=%u "
      "acquire_p999_us=%u release_p50_us=%u release_p99_us=%u release_p999_us=%u "
      "pair_p50_us=%u pair_p99_us=%u pair_p999_us=%u pair_max_us=%u failures=%llu "
      "script_calls=%llu\n",
      callers, r.hold_min_us, r.hold_max_us, pair.size(),
      static_cast<double>(pair.size()) / seconds, at(acq, 0.5), at(acq, 0.99), at(acq, 0.999),
      at(rel, 0.5), at(rel, 0.99), at(rel, 0.999), at(pair, 0.5), at(pair, 0.99), at(pair, 0.999),
      pair.empty() ? 0u : pair.back(), static_cast<unsigned long long>(r.failures.load()),
      static_cast<unsigned long long>(lim.backend_stats().other_script_calls));
  return r.failures.load() == 0 ? 0 : 1;
}
