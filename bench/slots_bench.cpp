// Concurrency limits in memory (issue 34's target: at least 5M acquire + release pairs per
// second on one thread): limiter::try_acquire then the slot's release, on one thread and on
// all threads, over 1 key (every caller contends for one table) and 10k keys. Numbers are
// reported, not asserted; run by hand:
//   build/release/bench/sluice_bench_slots --benchmark_min_time=1
#include <benchmark/benchmark.h>

#include <array>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <string_view>

#include <sluice/concurrency.hpp>
#include <sluice/limiter.hpp>

namespace {

sluice::limiter& shared_limiter() {
  static sluice::limiter lim = sluice::limiter::in_memory();
  return lim;
}

std::string_view key_of(std::uint64_t i, std::array<char, 32>& buf) {
  std::memcpy(buf.data(), "tenant:", 7);
  const auto r = std::to_chars(buf.data() + 7, buf.data() + buf.size(), i);
  return {buf.data(), static_cast<std::size_t>(r.ptr - buf.data())};
}

// state.range(0): keys. The limit is high enough that every acquire is admitted: the path
// that writes (a holder added, then removed).
void BM_AcquireRelease(benchmark::State& state) {
  auto& lim = shared_limiter();
  const sluice::concurrency_policy p{.limit = 1000, .lease_ttl = std::chrono::seconds{30}};
  const auto keys = static_cast<std::uint64_t>(state.range(0));
  std::array<char, 32> buf{};
  std::uint64_t x = 0x9e3779b97f4a7c15ull + static_cast<std::uint64_t>(state.thread_index());
  std::uint64_t refused = 0;
  for (auto _ : state) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    auto s = lim.try_acquire(key_of(x % keys, buf), p);
    if (!s) ++refused;
    s.release();
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["refused"] = static_cast<double>(refused);
}
BENCHMARK(BM_AcquireRelease)->Arg(1)->Arg(10'000)->Threads(1)->UseRealTime();
BENCHMARK(BM_AcquireRelease)->Arg(1)->Arg(10'000)->ThreadPerCpu()->UseRealTime();

// The reference beside it (scripts/bench part i): a plain limiter::check on the same
// limiter and keys, on one thread, through the same public API.
void BM_Check(benchmark::State& state) {
  auto& lim = shared_limiter();
  const sluice::policy p{.capacity = 1'000'000'000, .refill_per_second = 1'000'000'000};
  const auto keys = static_cast<std::uint64_t>(state.range(0));
  std::array<char, 32> buf{};
  std::uint64_t x = 0x9e3779b97f4a7c15ull;
  std::uint64_t refused = 0;  // denied; one counter name for both (the CSV output needs it)
  for (auto _ : state) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    if (!lim.check(key_of(x % keys, buf), p).allowed) ++refused;
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["refused"] = static_cast<double>(refused);
}
BENCHMARK(BM_Check)->Arg(1)->Arg(10'000)->Threads(1)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
