// The fault drill: checks under load from many threads while a real redis-server is killed,
// restarted and frozen (SIGSTOP) over and over. It prints what a user relies on: requests
// made, errors, degraded decisions, over-admissions (must be 0) and the longest response
// (must stay within the command timeout plus scheduling slack).
//
// Over-admission is measured against the truth: Redis runs with appendfsync always, so a
// kill loses no acknowledged write, and a key may admit at most
// capacity + refill_per_second * elapsed non-degraded requests.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <sluice/sluice.hpp>

#include "support/redis_server.hpp"

namespace {

using clock_type = std::chrono::steady_clock;

struct drill_options {
  double duration_s = 20;
  unsigned threads = 8;
  unsigned keys = 20;
  std::uint64_t capacity = 20;
  double refill_per_second = 5;
  std::string mode = "closed";
  int timeout_ms = 50;
  int fault_every_ms = 2000;
  int fault_length_ms = 700;
  std::string json_out;
  std::string table_row_out;
  bool check = false;
};

struct drill_result {
  std::uint64_t requests = 0, errors = 0, degraded = 0, allowed = 0, denied = 0;
  std::uint64_t over_admissions = 0, faults = 0;
  // Responses slower than the timeout plus 10 ms: how often the tail is more than noise.
  std::uint64_t late = 0;
  double longest_ms = 0, p99_ms = 0, elapsed_s = 0;
};

drill_result run(const drill_options& o) {
  sluice::test::redis_server redis({"--appendonly", "yes", "--appendfsync", "always"});
  sluice::redis_options ro;
  ro.url = redis.url();
  ro.command_timeout = std::chrono::milliseconds{o.timeout_ms};
  ro.connect_timeout = std::chrono::milliseconds{o.timeout_ms};
  ro.key_prefix = "chaos:";
  sluice::limiter lim(sluice::make_redis_backend(ro.url, ro));

  sluice::policy p;
  p.capacity = o.capacity;
  p.refill_per_second = o.refill_per_second;
  p.on_failure = *sluice::parse_failure_mode(o.mode);

  std::vector<std::atomic<std::uint64_t>> admitted(o.keys);
  std::atomic<std::uint64_t> requests{0}, errors{0}, degraded{0}, allowed{0}, denied{0};
  std::atomic<bool> stop{false};
  std::mutex latency_mu;
  std::vector<double> latencies;

  const auto start = clock_type::now();
  std::vector<std::jthread> workers;
  for (unsigned t = 0; t < o.threads; ++t) {
    workers.emplace_back([&, t] {
      std::mt19937 rng(t + 1);
      std::uniform_int_distribution<unsigned> pick(0, o.keys - 1);
      std::vector<double> mine;
      while (!stop.load(std::memory_order_relaxed)) {
        const unsigned k = pick(rng);
        const auto t0 = clock_type::now();
        std::error_code ec;
        const auto d = lim.check("key" + std::to_string(k), p, 1, ec);
        mine.push_back(std::chrono::duration<double, std::milli>(clock_type::now() - t0).count());
        requests.fetch_add(1);
        if (ec) {
          errors.fetch_add(1);
          continue;
        }
        (d.allowed ? allowed : denied).fetch_add(1);
        if (d.degraded) {
          degraded.fetch_add(1);
        } else if (d.allowed) {
          admitted[k].fetch_add(1);
        }
      }
      std::lock_guard lock(latency_mu);
      latencies.insert(latencies.end(), mine.begin(), mine.end());
    });
  }

  // Faults alternate between a crash (SIGKILL, then a restart on the same port and data)
  // and a freeze (SIGSTOP: connections stay open, nothing answers).
  std::uint64_t faults = 0;
  const auto deadline = start + std::chrono::duration<double>(o.duration_s);
  while (clock_type::now() + std::chrono::milliseconds{o.fault_every_ms} < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds{o.fault_every_ms - o.fault_length_ms});
    if (faults % 2 == 0) {
      redis.kill();
      std::this_thread::sleep_for(std::chrono::milliseconds{o.fault_length_ms});
      redis.start();
    } else {
      redis.pause();
      std::this_thread::sleep_for(std::chrono::milliseconds{o.fault_length_ms});
      redis.resume();
    }
    ++faults;
  }
  std::this_thread::sleep_until(deadline);
  stop = true;
  workers.clear();

  drill_result r;
  r.elapsed_s = std::chrono::duration<double>(clock_type::now() - start).count();
  r.requests = requests;
  r.errors = errors;
  r.degraded = degraded;
  r.allowed = allowed;
  r.denied = denied;
  r.faults = faults;
  const double ceiling = static_cast<double>(o.capacity) + o.refill_per_second * r.elapsed_s;
  for (auto& a : admitted) {
    const double n = static_cast<double>(a.load());
    if (n > std::floor(ceiling))
      r.over_admissions += static_cast<std::uint64_t>(n - std::floor(ceiling));
  }
  if (!latencies.empty()) {
    std::sort(latencies.begin(), latencies.end());
    r.longest_ms = latencies.back();
    r.p99_ms = latencies[latencies.size() * 99 / 100];
    const double late_ms = o.timeout_ms + 10.0;
    r.late = static_cast<std::uint64_t>(
        latencies.end() - std::upper_bound(latencies.begin(), latencies.end(), late_ms));
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Sluice fault drill: checks under load while Redis crashes and freezes"};
  drill_options o;
  app.add_option("--duration-s", o.duration_s, "How long to run")->capture_default_str();
  app.add_option("--threads", o.threads, "Concurrent callers")->capture_default_str();
  app.add_option("--keys", o.keys, "Distinct keys")
      ->check(CLI::Range(1u, 100000u))
      ->capture_default_str();
  app.add_option("--capacity", o.capacity, "Bucket capacity")->capture_default_str();
  app.add_option("--refill-per-second", o.refill_per_second)->capture_default_str();
  app.add_option("--mode", o.mode, "Failure mode: open, closed or local")
      ->check(CLI::IsMember({"open", "closed", "local"}))
      ->capture_default_str();
  app.add_option("--timeout-ms", o.timeout_ms, "Command and connect timeout")
      ->capture_default_str();
  app.add_option("--fault-every-ms", o.fault_every_ms, "Period of faults")->capture_default_str();
  app.add_option("--fault-length-ms", o.fault_length_ms, "How long Redis stays down or frozen")
      ->capture_default_str();
  app.add_option("--json", o.json_out, "Also write the figures to this file");
  app.add_option("--table-row", o.table_row_out,
                 "Also write them as one Markdown table row (docs/CHAOS.md) to this file");
  app.add_flag("--check", o.check,
               "Exit 1 unless errors = 0, over-admissions = 0 and the longest response stays "
               "within the timeout plus 1 s of scheduling slack");
  CLI11_PARSE(app, argc, argv);
  if (o.fault_length_ms >= o.fault_every_ms) {
    std::cerr << "--fault-length-ms must be shorter than --fault-every-ms\n";
    return 2;
  }
  spdlog::set_level(spdlog::level::warn);

  const auto r = run(o);
  nlohmann::ordered_json j;
  j["mode"] = o.mode;
  j["duration_s"] = r.elapsed_s;
  j["threads"] = o.threads;
  j["timeout_ms"] = o.timeout_ms;
  j["faults"] = r.faults;
  j["requests"] = r.requests;
  j["errors"] = r.errors;
  j["allowed"] = r.allowed;
  j["denied"] = r.denied;
  j["degraded"] = r.degraded;
  j["over_admissions"] = r.over_admissions;
  j["p99_ms"] = r.p99_ms;
  j["longest_ms"] = r.longest_ms;
  j["late"] = r.late;
  std::cout << j.dump(2) << "\n";
  if (!o.json_out.empty()) std::ofstream(o.json_out) << j.dump(2) << "\n";
  if (!o.table_row_out.empty()) {
    char row[512];
    std::snprintf(
        row, sizeof row,
        "| %s | %u | %llu | %llu | %llu | %llu | %llu | %llu | %llu | %.2f | %.1f | %llu |\n",
        o.mode.c_str(), o.threads, static_cast<unsigned long long>(r.faults),
        static_cast<unsigned long long>(r.requests), static_cast<unsigned long long>(r.errors),
        static_cast<unsigned long long>(r.degraded), static_cast<unsigned long long>(r.allowed),
        static_cast<unsigned long long>(r.denied),
        static_cast<unsigned long long>(r.over_admissions), r.p99_ms, r.longest_ms,
        static_cast<unsigned long long>(r.late));
    std::ofstream(o.table_row_out) << row;
  }

  if (o.check) {
    const bool ok = r.errors == 0 && r.over_admissions == 0 && r.requests > 0 &&
                    r.longest_ms <= o.timeout_ms + 1000.0;
    std::cout << (ok ? "drill passed" : "drill FAILED") << "\n";
    return ok ? 0 : 1;
  }
  return 0;
}
