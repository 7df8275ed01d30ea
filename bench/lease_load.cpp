// sluice_bench_lease: one hot key shared by every caller, demand above the limit, with and
// without quota leases (issue 33). Forks --processes processes of --threads threads; each
// thread checks the key as fast as it can on its process's limiter (limiter_from_url with
// default options: a user's program). Prints one line of key=value pairs:
//   decisions_per_s  checks decided per second, every process together
//   allowed          checks allowed (the limit's share of them)
//   script_calls     backend script calls, every process together
//   calls_per_1000   script calls per 1,000 decisions
//   leased_share     the share of checks decided in-process from leases
// A load tool for scripts/bench (part h); numbers are reported, never asserted.
#include <sluice/limiter.hpp>
#include <sluice/redis_backend.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

struct args {
  std::string url;
  int processes = 2;
  int threads = 1;
  double seconds = 3;
  long lease_ttl_ms = 0;
  std::uint64_t capacity = 10'000;
  double rate = 100'000;
};

struct result {
  std::uint64_t checks = 0;
  std::uint64_t allowed = 0;
  std::uint64_t script_calls = 0;
  std::uint64_t leased = 0;
};

[[noreturn]] void usage() {
  std::fprintf(stderr,
               "usage: sluice_bench_lease --url URL [--processes N] [--threads N] [--seconds S]\n"
               "                          [--lease-ttl-ms MS] [--capacity N] [--rate R]\n");
  std::exit(2);
}

args parse(int argc, char** argv) {
  args a;
  for (int i = 1; i < argc; ++i) {
    const std::string_view k = argv[i];
    if (i + 1 >= argc) usage();
    const char* v = argv[++i];
    if (k == "--url") {
      a.url = v;
    } else if (k == "--processes") {
      a.processes = std::atoi(v);
    } else if (k == "--threads") {
      a.threads = std::atoi(v);
    } else if (k == "--seconds") {
      a.seconds = std::atof(v);
    } else if (k == "--lease-ttl-ms") {
      a.lease_ttl_ms = std::atol(v);
    } else if (k == "--capacity") {
      a.capacity = std::strtoull(v, nullptr, 10);
    } else if (k == "--rate") {
      a.rate = std::atof(v);
    } else {
      usage();
    }
  }
  if (a.url.empty() || a.processes < 1 || a.threads < 1 || a.seconds <= 0) usage();
  return a;
}

result run_process(const args& a) {
  auto lim = sluice::limiter_from_url(a.url);
  sluice::policy p;
  p.capacity = a.capacity;
  p.refill_per_second = a.rate;
  p.lease_ttl = std::chrono::milliseconds{a.lease_ttl_ms};
  const sluice::valid_policy vp(p);
  std::atomic<std::uint64_t> checks{0}, allowed{0};
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(a.seconds);
  std::vector<std::thread> ts;
  for (int t = 0; t < a.threads; ++t) {
    ts.emplace_back([&] {
      std::uint64_t n = 0, ok = 0;
      std::error_code ec;
      while (std::chrono::steady_clock::now() < end) {
        for (int i = 0; i < 256; ++i) {
          ok += lim.check("hot", vp, 1, ec).allowed ? 1 : 0;
          ++n;
        }
      }
      checks += n;
      allowed += ok;
    });
  }
  for (auto& t : ts) t.join();
  const auto st = lim.stats();
  const auto bs = lim.backend_stats();
  return {checks.load(), allowed.load(), bs.script_calls + bs.other_script_calls,
          st.leased_decisions};
}

}  // namespace

int main(int argc, char** argv) {
  const args a = parse(argc, argv);
  std::vector<std::pair<pid_t, int>> kids;
  for (int i = 0; i < a.processes; ++i) {
    int fds[2];
    if (pipe(fds) != 0) return 1;
    const pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      const result r = run_process(a);
      const bool ok = write(fds[1], &r, sizeof r) == sizeof r;
      _exit(ok ? 0 : 1);
    }
    close(fds[1]);
    kids.emplace_back(pid, fds[0]);
  }
  result sum;
  for (auto& [pid, fd] : kids) {
    result r;
    if (read(fd, &r, sizeof r) != sizeof r) {
      std::fprintf(stderr, "sluice_bench_lease: a process failed\n");
      return 1;
    }
    close(fd);
    waitpid(pid, nullptr, 0);
    sum.checks += r.checks;
    sum.allowed += r.allowed;
    sum.script_calls += r.script_calls;
    sum.leased += r.leased;
  }
  const double per_s = static_cast<double>(sum.checks) / a.seconds;
  std::printf(
      "decisions_per_s=%.0f allowed=%llu script_calls=%llu calls_per_1000=%.3f leased_share=%.4f\n",
      per_s, static_cast<unsigned long long>(sum.allowed),
      static_cast<unsigned long long>(sum.script_calls),
      sum.checks ? 1000.0 * static_cast<double>(sum.script_calls) / static_cast<double>(sum.checks)
                 : 0.0,
      sum.checks ? static_cast<double>(sum.leased) / static_cast<double>(sum.checks) : 0.0);
  return 0;
}
