// The seed's atomicity test, stronger: 200 concurrent callers on one key (threads of one
// process, and threads of several processes) admit exactly the capacity. The same test
// body run on a naive read-then-write limiter must over-admit, which shows it can fail.
#include <sluice/limiter.hpp>
#include <sluice/redis_backend.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <functional>
#include <latch>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "algorithm/token_bucket.hpp"
#include "support/redis_client.hpp"
#include "support/redis_server.hpp"

namespace {

using namespace sluice;
using namespace std::chrono_literals;

constexpr int callers = 200;
constexpr std::uint64_t capacity = 10;

policy one_key_policy() {
  policy p;
  p.capacity = capacity;
  p.refill_per_second = 0.001;          // ~nothing refills while the test runs
  p.on_failure = failure_mode::closed;  // a failed call can only lower the count
  return p;
}

using backend_factory = std::function<std::shared_ptr<backend>()>;

// The real thing, with a timeout long enough that a loaded machine does not degrade.
backend_factory real_backend(std::string url) {
  return [url] {
    redis_options o;
    o.url = url;
    o.command_timeout = 10s;
    o.connect_timeout = 5s;
    return make_redis_backend(o.url, o);
  };
}

// Test-only: GET the bucket, decide in C++, SET it back. Every step is correct on its own;
// only the gap between the read and the write is wrong, which is the point.
class naive_backend final : public backend {
 public:
  explicit naive_backend(std::uint16_t port) : port_(port) {}
  std::error_code decide(std::string_view key, const policy& p, std::uint64_t cost,
                         decision& out) override {
    test::redis_client c(port_);
    const std::string k = "naive:" + std::string(key);
    std::optional<detail::token_bucket_state> prev;
    if (auto v = c.get(k)) {
      detail::token_bucket_state s;
      const auto sp = v->find(' ');
      std::from_chars(v->data(), v->data() + sp, s.level_ut);
      std::from_chars(v->data() + sp + 1, v->data() + v->size(), s.ts_ms);
      prev = s;
    }
    const std::int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                    std::chrono::system_clock::now().time_since_epoch())
                                    .count();
    const auto o = detail::token_bucket_decide(detail::to_params(p, cost), prev, now_ms);
    if (o.allowed) {
      c.command({"SET", k, std::to_string(o.next.level_ut) + " " + std::to_string(o.next.ts_ms)});
    }
    out = detail::to_decision(o, p.capacity);
    return {};
  }
  void async_decide(std::string_view key, const policy& p, std::uint64_t cost,
                    decide_handler h) override {
    decision d;
    auto ec = decide(key, p, cost, d);
    h(ec, d);
  }

 private:
  std::uint16_t port_;
};

backend_factory naive(std::uint16_t port) {
  return [port] { return std::make_shared<naive_backend>(port); };
}

// `threads` callers released together, one check each on `key`; returns how many were
// admitted. Degraded decisions (closed: denied) are counted into `degraded`.
int admitted_by_threads(limiter& lim, const std::string& key, int threads, int& degraded) {
  std::latch start(threads + 1);
  std::atomic<int> admitted{0}, failed{0};
  std::vector<std::thread> pool;
  for (int i = 0; i < threads; ++i) {
    pool.emplace_back([&] {
      start.arrive_and_wait();
      const auto d = lim.check(key, one_key_policy());
      if (d.allowed) ++admitted;
      if (d.degraded) ++failed;
    });
  }
  start.arrive_and_wait();
  for (auto& t : pool) t.join();
  degraded = failed.load();
  return admitted.load();
}

int admitted_in_one_process(const backend_factory& make, const std::string& key) {
  limiter lim(make());
  int warm_degraded = 0;
  // Connect first, so the callers race on the key and not on the connection.
  admitted_by_threads(lim, key + ":warm-up", 1, warm_degraded);
  int degraded = 0;
  const int n = admitted_by_threads(lim, key, callers, degraded);
  EXPECT_EQ(degraded, 0) << "calls failed: the count proves nothing";
  return n;
}

int thread_count() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.starts_with("Threads:")) return std::stoi(line.substr(8));
  }
  return -1;
}

// `processes` children, forked before this process has any backend or thread, each running
// callers / processes threads through its own backend. Returns the total admitted, or -1
// when a child failed.
int admitted_by_processes(const backend_factory& make, const std::string& key, int processes) {
#if defined(__SANITIZE_THREAD__)
  // ThreadSanitizer may run a background thread of its own (not when ctest runs this test
  // alone in its process), so under it the bound is "at most" one more.
  constexpr int own_threads = 2;
#else
  constexpr int own_threads = 1;
#endif
  EXPECT_GE(thread_count(), 1);
  EXPECT_LE(thread_count(), own_threads) << "fork() needs a parent without backend threads";
  int ready[2], go[2], results[2];
  if (::pipe(ready) != 0 || ::pipe(go) != 0 || ::pipe(results) != 0) return -1;
  std::vector<pid_t> children;
  for (int i = 0; i < processes; ++i) {
    const pid_t pid = ::fork();
    if (pid < 0) break;
    if (pid == 0) {
      ::close(ready[0]);
      ::close(go[1]);
      ::close(results[0]);
      int code = 0;
      try {
        limiter lim(make());
        int degraded = 0;
        admitted_by_threads(lim, key + ":warm-up:" + std::to_string(i), 1, degraded);
        const char byte = 1;
        if (::write(ready[1], &byte, 1) != 1) ::_exit(3);
        char dummy;
        while (::read(go[0], &dummy, 1) > 0) {
        }  // EOF: the parent let everyone go at once
        int n = admitted_by_threads(lim, key, callers / processes, degraded);
        if (degraded != 0) code = 4;
        if (::write(results[1], &n, sizeof n) != sizeof n) code = 5;
      } catch (...) {
        code = 6;
      }
      std::fflush(nullptr);
      ::_exit(code);  // no gtest or static teardown in the child
    }
    children.push_back(pid);
  }
  ::close(ready[1]);
  ::close(go[0]);
  ::close(results[1]);
  for (std::size_t i = 0; i < children.size(); ++i) {
    char byte;
    if (::read(ready[0], &byte, 1) != 1) break;
  }
  ::close(go[1]);  // release every child together
  int total = 0;
  bool ok = static_cast<int>(children.size()) == processes;
  for (std::size_t i = 0; i < children.size(); ++i) {
    int n = 0;
    if (::read(results[0], &n, sizeof n) == sizeof n) {
      total += n;
    } else {
      ok = false;
    }
  }
  for (pid_t pid : children) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      ADD_FAILURE() << "child " << pid << " failed with status " << status;
      ok = false;
    }
  }
  ::close(ready[0]);
  ::close(results[0]);
  return ok ? total : -1;
}

TEST(RedisAtomicityTest, TwoHundredThreadsAdmitExactlyTheCapacity) {
  test::redis_server redis;
  for (int run = 0; run < 3; ++run) {
    EXPECT_EQ(admitted_in_one_process(real_backend(redis.url()), "threads:" + std::to_string(run)),
              static_cast<int>(capacity));
  }
}

TEST(RedisAtomicityTest, NaiveLimiterIsCorrectOneCallAtATime) {
  // The control: the naive limiter's math is right; only concurrency breaks it.
  test::redis_server redis;
  limiter lim(std::make_shared<naive_backend>(redis.port()));
  int admitted = 0;
  for (int i = 0; i < 3 * static_cast<int>(capacity); ++i) {
    admitted += lim.check("sequential", one_key_policy()).allowed ? 1 : 0;
  }
  EXPECT_EQ(admitted, static_cast<int>(capacity));
}

TEST(RedisAtomicityTest, NaiveReadThenWriteOverAdmitsUnderTheSameTest) {
  test::redis_server redis;
  int worst = 0;
  for (int run = 0; run < 10 && worst <= static_cast<int>(capacity); ++run) {
    worst = std::max(worst, admitted_in_one_process(naive(redis.port()),
                                                    "naive-threads:" + std::to_string(run)));
  }
  EXPECT_GT(worst, static_cast<int>(capacity))
      << "the naive limiter never over-admitted: the test cannot tell a race from none";
  std::printf("naive read-then-write admitted %d of capacity %d\n", worst, int{capacity});
}

TEST(RedisAtomicityTest, SeveralProcessesAdmitExactlyTheCapacity) {
  test::redis_server redis;  // a child process, not a thread: the parent stays single-threaded
  for (int run = 0; run < 2; ++run) {
    EXPECT_EQ(admitted_by_processes(real_backend(redis.url()), "procs:" + std::to_string(run), 4),
              static_cast<int>(capacity));
  }
}

TEST(RedisAtomicityTest, NaiveReadThenWriteOverAdmitsAcrossProcesses) {
  test::redis_server redis;
  int worst = 0;
  for (int run = 0; run < 10 && worst <= static_cast<int>(capacity); ++run) {
    worst = std::max(
        worst, admitted_by_processes(naive(redis.port()), "naive-procs:" + std::to_string(run), 4));
  }
  EXPECT_GT(worst, static_cast<int>(capacity));
  std::printf("naive read-then-write in 4 processes admitted %d of capacity %d\n", worst,
              int{capacity});
}

}  // namespace
