// sluice_bench_redis: library decisions/s and latency on the Redis backend (docs/BENCHMARKS.md,
// part b). N concurrent callers each check a random key of K, one check after another, for a
// fixed time; each prints one line of `name=value` fields that scripts/bench parses.
//
//   sluice_bench_redis --url redis://127.0.0.1:PORT [--callers 1,50,500] [--keys 10000]
//                      [--seconds 5] [--warmup 1] [--mode async|loop|threads] [--max-batch 32]
//
// async:   the callers are chains of sluice::limiter::async_check on one thread (an Asio
//          io_context): the way a server uses Sluice. Concurrency = checks in flight.
// loop:    the same chains, with the backend's connection on the callers' io_context
//          (redis_options::run_on): one thread does it all, with no hand-off per check.
// threads: one OS thread per caller, each calling the blocking limiter::check.
#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/io_context.hpp>

#include <sluice/limiter.hpp>
#include <sluice/redis_backend.hpp>

namespace {

namespace asio = boost::asio;
using steady = std::chrono::steady_clock;

struct options {
  std::string url;
  std::vector<int> callers{1, 50, 500};
  std::uint64_t keys = 10'000;
  double seconds = 5;
  double warmup = 1;
  std::string mode = "async";
  std::size_t max_batch = sluice::redis_options{}.max_batch;  // 1: no batching
};

// What one caller (or one run, once merged) saw inside the measured window, and how many
// checks it completed in all (warm-up included: what Redis's CPU counters saw).
struct tally {
  std::vector<std::uint32_t> latency_ns;
  std::uint64_t allowed = 0;
  std::uint64_t degraded = 0;
  std::uint64_t completed = 0;

  void add(steady::duration latency, const sluice::decision& d) {
    latency_ns.push_back(static_cast<std::uint32_t>(
        std::min<std::int64_t>(std::chrono::nanoseconds(latency).count(), UINT32_MAX)));
    allowed += d.allowed ? 1 : 0;
    degraded += d.degraded ? 1 : 0;
  }
  void merge(tally&& o) {
    latency_ns.insert(latency_ns.end(), o.latency_ns.begin(), o.latency_ns.end());
    allowed += o.allowed;
    degraded += o.degraded;
    completed += o.completed;
  }
};

// A cheap per-caller random key: "k:<i>" for i < keys.
class key_source {
 public:
  explicit key_source(std::uint64_t seed, std::uint64_t keys)
      : x_(seed * 0x9E3779B97F4A7C15ull + 1), keys_(keys) {}
  std::string_view next() {
    x_ ^= x_ << 13;
    x_ ^= x_ >> 7;
    x_ ^= x_ << 17;
    buf_[0] = 'k';
    buf_[1] = ':';
    auto r = std::to_chars(buf_.data() + 2, buf_.data() + buf_.size(), x_ % keys_);
    return {buf_.data(), static_cast<std::size_t>(r.ptr - buf_.data())};
  }

 private:
  std::uint64_t x_;
  std::uint64_t keys_;
  std::array<char, 32> buf_{};
};

sluice::policy bench_policy() {
  // Over 10k keys at ~100k checks/s a key sees ~10 checks/s: nearly all are admitted,
  // which is the path that writes to Redis.
  sluice::policy p;
  p.capacity = 100;
  p.refill_per_second = 100;
  return p;
}

struct window {
  steady::time_point from;   // record completions of checks started from here...
  steady::time_point until;  // ...and completed before here
};

// On `io`, which nothing else runs meanwhile; returns when every chain has ended.
tally run_async(sluice::limiter& lim, asio::io_context& io, bool loop, int callers,
                std::uint64_t keys, window w) {
  tally t;
  const auto pol = bench_policy();
  std::vector<key_source> sources;
  for (int c = 0; c < callers; ++c) sources.emplace_back(static_cast<std::uint64_t>(c + 1), keys);
  int live = callers;
  // Each caller issues its next check from the completion of the previous one. In loop mode
  // the backend's connection keeps `io` busy for ever, so the last chain stops it; otherwise
  // run() returns once no work is left, and only then may `io` go: a stop() would let it be
  // destroyed while the backend's thread still holds work on it.
  std::function<void(int)> issue = [&](int c) {
    const auto t0 = steady::now();
    lim.async_check(sources[static_cast<std::size_t>(c)].next(), pol, 1,
                    asio::bind_executor(io, [&, c, t0](std::error_code ec, sluice::decision d) {
                      const auto t1 = steady::now();
                      if (ec) throw std::runtime_error("check failed: " + ec.message());
                      ++t.completed;
                      if (t0 >= w.from && t1 <= w.until) t.add(t1 - t0, d);
                      if (t1 < w.until) return issue(c);
                      if (--live == 0 && loop) io.stop();
                    }));
  };
  for (int c = 0; c < callers; ++c) issue(c);
  io.restart();
  io.run();
  return t;
}

tally run_threads(sluice::limiter& lim, int callers, std::uint64_t keys, window w) {
  std::vector<tally> per(static_cast<std::size_t>(callers));
  {
    std::vector<std::jthread> threads;
    for (int c = 0; c < callers; ++c) {
      threads.emplace_back([&, c] {
        key_source src(static_cast<std::uint64_t>(c + 1), keys);
        const auto pol = bench_policy();
        auto& t = per[static_cast<std::size_t>(c)];
        for (;;) {
          const auto t0 = steady::now();
          const auto d = lim.check(src.next(), pol, 1);
          const auto t1 = steady::now();
          ++t.completed;
          if (t0 >= w.from && t1 <= w.until) t.add(t1 - t0, d);
          if (t1 >= w.until) return;
        }
      });
    }
  }
  tally all;
  for (auto& t : per) all.merge(std::move(t));
  return all;
}

double percentile_us(std::vector<std::uint32_t>& v, double q) {
  if (v.empty()) return 0;
  const auto k = static_cast<std::size_t>(q * static_cast<double>(v.size() - 1));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k] / 1000.0;
}

std::vector<int> parse_list(std::string_view s) {
  std::vector<int> out;
  while (!s.empty()) {
    const auto comma = s.find(',');
    const auto part = s.substr(0, comma);
    int v = 0;
    auto r = std::from_chars(part.data(), part.data() + part.size(), v);
    if (r.ec != std::errc{} || v <= 0) throw std::invalid_argument("bad --callers list");
    out.push_back(v);
    s = comma == std::string_view::npos ? std::string_view{} : s.substr(comma + 1);
  }
  return out;
}

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(std::string(a) + " needs a value");
      return argv[++i];
    };
    if (a == "--url") {
      o.url = value();
    } else if (a == "--callers") {
      o.callers = parse_list(value());
    } else if (a == "--keys") {
      o.keys = std::stoull(value());
    } else if (a == "--seconds") {
      o.seconds = std::stod(value());
    } else if (a == "--warmup") {
      o.warmup = std::stod(value());
    } else if (a == "--mode") {
      o.mode = value();
    } else if (a == "--max-batch") {
      o.max_batch = std::stoull(value());
    } else {
      throw std::invalid_argument("unknown argument " + std::string(a));
    }
  }
  if (o.url.empty()) throw std::invalid_argument("--url redis://HOST:PORT is required");
  if (o.mode != "async" && o.mode != "loop" && o.mode != "threads")
    throw std::invalid_argument("--mode async|loop|threads");
  if (o.keys == 0 || o.seconds <= 0 || o.warmup < 0) throw std::invalid_argument("bad numbers");
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const auto o = parse(argc, argv);
    // Declared before the limiter: in loop mode the backend runs on it, so it must outlive it.
    asio::io_context io(1);
    const bool loop = o.mode == "loop";
    sluice::redis_options ro;
    ro.url = o.url;
    // A benchmark saturates Redis on purpose: queueing is measured, not failed.
    ro.command_timeout = std::chrono::milliseconds{2000};
    ro.max_batch = o.max_batch;
    if (loop) ro.run_on = &io;
    sluice::limiter lim(sluice::make_redis_backend(ro.url, ro));
    // Let the connection come up (and the script load) before timing anything.
    for (int tries = 0;; ++tries) {
      bool up = false;
      if (loop) {
        lim.async_check("warmup", bench_policy(), 1,
                        asio::bind_executor(io, [&](std::error_code, sluice::decision d) {
                          up = !d.degraded;
                          io.stop();
                        }));
        io.restart();
        io.run();
        if (!up) {
          io.restart();
          io.run_for(std::chrono::milliseconds{10});  // the connection needs `io` to connect
        }
      } else {
        std::error_code ec;
        up = !lim.check("warmup", bench_policy(), 1, ec).degraded;
        if (!up) std::this_thread::sleep_for(std::chrono::milliseconds{10});
      }
      if (up) break;
      if (tries > 200) throw std::runtime_error("Redis did not answer at " + o.url);
    }
    for (int callers : o.callers) {
      const auto start = steady::now();
      const window w{start + std::chrono::duration_cast<steady::duration>(
                                 std::chrono::duration<double>(o.warmup)),
                     start + std::chrono::duration_cast<steady::duration>(
                                 std::chrono::duration<double>(o.warmup + o.seconds))};
      asio::io_context chains(1);  // async mode: the callers' own io_context, as a server's
      auto t = o.mode == "threads" ? run_threads(lim, callers, o.keys, w)
                                   : run_async(lim, loop ? io : chains, loop, callers, o.keys, w);
      const auto n = t.latency_ns.size();
      std::printf(
          "mode=%s callers=%d keys=%llu seconds=%.1f decisions=%zu per_sec=%.0f p50_us=%.1f "
          "p99_us=%.1f p999_us=%.1f allowed_pct=%.1f degraded=%llu completed=%llu\n",
          o.mode.c_str(), callers, static_cast<unsigned long long>(o.keys), o.seconds, n,
          static_cast<double>(n) / o.seconds, percentile_us(t.latency_ns, 0.50),
          percentile_us(t.latency_ns, 0.99), percentile_us(t.latency_ns, 0.999),
          n ? 100.0 * static_cast<double>(t.allowed) / static_cast<double>(n) : 0.0,
          static_cast<unsigned long long>(t.degraded),
          static_cast<unsigned long long>(t.completed));
      std::fflush(stdout);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sluice_bench_redis: %s\n", e.what());
    return 1;
  }
}
