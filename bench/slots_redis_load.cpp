// sluice_bench_slots_redis: acquire + release latency of concurrency limits on a Redis
// backend (issue 34's target: p99 under 1 ms at 200 callers on loopback). N callers, one OS
// thread each, take a slot of one of K keys (limit high enough that all are admitted), then
// release it by id, waiting for both answers (limiter::try_acquire, slot::detach,
// limiter::slot_step), for a fixed time. Prints one line of `name=value` fields.
//
//   sluice_bench_slots_redis --url redis://127.0.0.1:PORT [--callers 200] [--keys 1000]
//                            [--seconds 5]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <sluice/concurrency.hpp>
#include <sluice/limiter.hpp>
#include <sluice/redis_backend.hpp>

namespace {

using steady = std::chrono::steady_clock;

const char* arg(int argc, char** argv, const char* name, const char* fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], name) == 0) return argv[i + 1];
  }
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string url = arg(argc, argv, "--url", "");
  if (url.empty()) {
    std::fprintf(stderr,
                 "usage: %s --url redis://HOST:PORT [--callers N] [--keys K] "
                 "[--seconds S]\n",
                 argv[0]);
    return 2;
  }
  const int callers = std::atoi(arg(argc, argv, "--callers", "200"));
  const int keys = std::atoi(arg(argc, argv, "--keys", "1000"));
  const int seconds = std::atoi(arg(argc, argv, "--seconds", "5"));
  sluice::redis_options o;
  o.command_timeout = std::chrono::milliseconds{1000};
  auto lim = sluice::limiter_from_url(url, o);
  const sluice::concurrency_policy p{.limit = 100'000,
                                     .lease_ttl = std::chrono::seconds{30},
                                     .on_failure = sluice::failure_mode::closed};
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> failures{0};
  std::vector<std::vector<std::uint32_t>> latencies_us(static_cast<std::size_t>(callers));
  std::vector<std::thread> threads;
  for (int t = 0; t < callers; ++t) {
    threads.emplace_back([&, t] {
      auto& mine = latencies_us[static_cast<std::size_t>(t)];
      std::uint64_t x = 0x9e3779b97f4a7c15ull + static_cast<std::uint64_t>(t);
      while (!stop.load(std::memory_order_relaxed)) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        const auto key = "slot-bench:" + std::to_string(x % static_cast<std::uint64_t>(keys));
        const auto start = steady::now();
        auto s = lim.try_acquire(key, p);
        std::error_code ec;
        const bool ok =
            s && !s.degraded() &&
            lim.slot_step(key, p, sluice::slot_operation::release, s.detach(), ec).held && !ec;
        const auto took =
            std::chrono::duration_cast<std::chrono::microseconds>(steady::now() - start);
        if (!ok) failures.fetch_add(1, std::memory_order_relaxed);
        mine.push_back(static_cast<std::uint32_t>(took.count()));
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::seconds{seconds});
  stop = true;
  for (auto& th : threads) th.join();
  std::vector<std::uint32_t> all;
  for (const auto& v : latencies_us) all.insert(all.end(), v.begin(), v.end());
  std::sort(all.begin(), all.end());
  const auto at = [&](double q) {
    return all.empty() ? 0u
                       : all[std::min(all.size() - 1, static_cast<std::size_t>(q * all.size()))];
  };
  std::printf("callers=%d pairs=%zu pairs_per_s=%.0f p50_us=%u p99_us=%u max_us=%u failures=%llu\n",
              callers, all.size(), static_cast<double>(all.size()) / seconds, at(0.5), at(0.99),
              all.empty() ? 0u : all.back(), static_cast<unsigned long long>(failures.load()));
  return failures.load() == 0 ? 0 : 1;
}
