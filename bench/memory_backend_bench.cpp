// Memory backend decisions/s (docs/BENCHMARKS.md, part d): one thread and all threads, over
// 10k and 1M keys, with two clocks:
// - steady: the production default, sluice::steady_clock (one clock_gettime per decision,
//   about 60 ns on this VM's kvm-clock);
// - ticking: a cheap clock, an atomic that a background thread refreshes from steady_clock
//   every millisecond (one relaxed load per decision). The decision math works in whole
//   milliseconds, so this loses nothing but up to one tick of lag, and lag only makes the
//   limiter stricter (less refill), never looser.
//
// Keys are drawn at random (xorshift per thread) so 1M keys really miss the caches; every key
// is touched once before timing, so the map is in its steady state, not growing. The policy
// refills fast enough that nearly every decision is an admission, the path that writes.
#include <benchmark/benchmark.h>

#include <array>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <sluice/clock.hpp>
#include <sluice/memory_backend.hpp>

namespace {

enum clock_kind : int { steady = 0, ticking = 1 };

class ticking_clock final : public sluice::clock {
 public:
  ticking_clock()
      : now_us_(read()), ticker_([this](std::stop_token stop) {
          while (!stop.stop_requested()) {
            std::this_thread::sleep_for(std::chrono::milliseconds{1});
            now_us_.store(read(), std::memory_order_relaxed);
          }
        }) {}
  std::chrono::microseconds now() const noexcept override {
    return std::chrono::microseconds{now_us_.load(std::memory_order_relaxed)};
  }

 private:
  static std::int64_t read() noexcept { return sluice::steady_clock{}.now().count(); }
  std::atomic<std::int64_t> now_us_;
  std::jthread ticker_;
};

struct world {
  std::shared_ptr<sluice::backend> backend;
};

// "user:<i>", written into `buf` without allocating or touching a table of keys, so the
// harness adds no cache miss of its own to the 1M-key runs.
std::string_view key_of(std::uint64_t i, std::array<char, 32>& buf) {
  std::memcpy(buf.data(), "user:", 5);
  auto r = std::to_chars(buf.data() + 5, buf.data() + buf.size(), i);
  return {buf.data(), static_cast<std::size_t>(r.ptr - buf.data())};
}

sluice::policy mostly_allowed() {
  sluice::policy p;
  p.capacity = 1000;
  p.refill_per_second = 1e6;
  return p;
}

// One shared backend per (key count, clock), built on first use and kept for every thread
// count, so the threaded runs measure the same warm map.
const world& get_world(std::size_t n_keys, clock_kind ck) {
  static std::mutex mu;
  static std::map<std::pair<std::size_t, int>, std::unique_ptr<world>> worlds;
  std::lock_guard lock(mu);
  auto& w = worlds[{n_keys, ck}];
  if (!w) {
    w = std::make_unique<world>();
    sluice::memory_options o;
    // Room for every key: this measures deciding, not eviction at the bound.
    o.max_keys = n_keys * 2;
    if (ck == ticking) o.time_source = std::make_shared<ticking_clock>();
    w->backend = sluice::make_memory_backend(o);
    const auto p = mostly_allowed();
    sluice::decision d;
    std::array<char, 32> buf;
    for (std::size_t i = 0; i < n_keys; ++i) w->backend->decide(key_of(i, buf), p, 1, d);
  }
  return *w;
}

void bm_decide(benchmark::State& state) {
  const auto n_keys = static_cast<std::size_t>(state.range(0));
  const auto& w = get_world(n_keys, static_cast<clock_kind>(state.range(1)));
  const auto p = mostly_allowed();
  std::uint64_t x = 0x9E3779B97F4A7C15ull * static_cast<std::uint64_t>(state.thread_index() + 1);
  std::uint64_t allowed = 0;
  sluice::decision d;
  std::array<char, 32> buf;
  for (auto _ : state) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    w.backend->decide(key_of(x % n_keys, buf), p, 1, d);
    allowed += d.allowed ? 1 : 0;
  }
  benchmark::DoNotOptimize(allowed);
  state.SetItemsProcessed(state.iterations());
  state.counters["allowed_pct"] =
      benchmark::Counter(100.0 * static_cast<double>(allowed) /
                             static_cast<double>(std::max<std::int64_t>(1, state.iterations())),
                         benchmark::Counter::kAvgThreads);
}

void args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"keys", "ticking_clock"});
  const int all = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int keys : {10'000, 1'000'000}) {
    for (int ck : {steady, ticking}) b->Args({keys, ck});
  }
  b->Threads(1);
  if (all > 1) b->Threads(all);
  b->UseRealTime();
}

BENCHMARK(bm_decide)->Apply(args);

}  // namespace

BENCHMARK_MAIN();
