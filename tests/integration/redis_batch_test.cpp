// The decision batcher (src/redis/decision_batcher.hpp) against a real redis-server:
// concurrent single-key decisions travel together in script calls of
// lua/decide_batch.lua and stay exact; a lone decision is its own call; NOSCRIPT, a
// bad key and a frozen server are handled per decision.
#include <sluice/error.hpp>
#include <sluice/redis_backend.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "redis/resp.hpp"
#include "support/redis_client.hpp"
#include "support/redis_server.hpp"

namespace {

using namespace sluice;
using namespace std::chrono_literals;

constexpr int keys = 20;
constexpr std::uint64_t capacity = 100;

policy bucket() {
  policy p;
  p.capacity = capacity;
  p.refill_per_second = 0.001;
  return p;
}

std::shared_ptr<backend> make(const std::string& url, std::size_t max_batch,
                              std::chrono::milliseconds timeout = 10s) {
  redis_options o;
  o.url = url;
  o.command_timeout = timeout;
  o.connect_timeout = 2s;
  o.max_batch = max_batch;
  return make_redis_backend(o.url, o);
}

// Waits until `n` completions were counted, at most `within`.
class countdown {
 public:
  explicit countdown(int n) : left_(n) {}
  void done() {
    std::lock_guard lock(mu_);
    --left_;
    cv_.notify_all();
  }
  bool wait(std::chrono::seconds within) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, within, [&] { return left_ == 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int left_;
};

long long stat_calls(test::redis_client& c, const std::string& command) {
  const auto info = c.command({"INFO", "commandstats"});
  const std::string text(redis::reply_text(*info));
  const std::string tag = "cmdstat_" + command + ":calls=";
  const auto at = text.find(tag);
  return at == std::string::npos ? 0 : std::stoll(text.substr(at + tag.size()));
}

struct tally {
  std::array<std::atomic<int>, keys> admitted{};
  std::atomic<int> errors{0};
};

// `n` async decisions from two threads at once, over `keys` keys; waits for all.
void hammer(backend& b, const std::string& prefix, int n, tally& t) {
  countdown left(n);
  std::vector<std::thread> threads;
  for (int th = 0; th < 2; ++th) {
    threads.emplace_back([&, th] {
      for (int i = th; i < n; i += 2) {
        const int k = i % keys;
        b.async_decide(prefix + std::to_string(k), bucket(), 1,
                       [&, k](std::error_code ec, decision d) {
                         if (ec) ++t.errors;
                         if (!ec && d.allowed) ++t.admitted[k];
                         left.done();
                       });
      }
    });
  }
  for (auto& th : threads) th.join();
  ASSERT_TRUE(left.wait(60s)) << "decisions never completed";
}

TEST(RedisBatchTest, ConcurrentDecisionsShareScriptCallsAndStayExact) {
  test::redis_server redis;
  test::redis_client c(redis.port());
  auto b = make(redis.url(), 32);
  decision warm;
  ASSERT_FALSE(b->decide("warm", bucket(), 1, warm));
  c.command({"CONFIG", "RESETSTAT"});
  constexpr int n = 6000;
  tally t;
  hammer(*b, "x:", n, t);
  EXPECT_EQ(t.errors.load(), 0);
  for (int k = 0; k < keys; ++k) EXPECT_EQ(t.admitted[k].load(), static_cast<int>(capacity)) << k;
  // Thousands outstanding at once: most decisions shared a call with others.
  const long long calls = stat_calls(c, "evalsha");
  EXPECT_GT(calls, 0);
  EXPECT_LT(calls, n / 2) << "decisions were not batched";
  // The backend's own counters say the same as Redis (the warm-up decision included).
  const auto st = b->stats();
  EXPECT_EQ(st.batched_decisions, static_cast<std::uint64_t>(n) + 1);
  EXPECT_EQ(st.script_calls, static_cast<std::uint64_t>(calls) + 1);
  EXPECT_EQ(st.in_flight, 0u);
  EXPECT_TRUE(st.up);
}

// The largest max_batch allowed still fits the script (its keys go through one unpack), and
// one above it is refused up front rather than failing every large batch at run time.
TEST(RedisBatchTest, TheLargestMaxBatchWorksAndALargerOneIsRefused) {
  test::redis_server redis;
  test::redis_client c(redis.port());
  EXPECT_THROW(make(redis.url(), 1001), std::invalid_argument);
  EXPECT_THROW(make(redis.url(), 0), std::invalid_argument);
  auto b = make(redis.url(), 1000);
  decision warm;
  ASSERT_FALSE(b->decide("warm", bucket(), 1, warm));
  c.command({"CONFIG", "RESETSTAT"});
  constexpr int n = 6000;
  tally t;
  hammer(*b, "big:", n, t);
  EXPECT_EQ(t.errors.load(), 0);
  for (int k = 0; k < keys; ++k) EXPECT_EQ(t.admitted[k].load(), static_cast<int>(capacity)) << k;
  EXPECT_LT(stat_calls(c, "evalsha"), n / 2) << "decisions were not batched";
}

TEST(RedisBatchTest, MaxBatchOneSendsEveryDecisionAlone) {
  test::redis_server redis;
  test::redis_client c(redis.port());
  auto b = make(redis.url(), 1);
  decision warm;
  ASSERT_FALSE(b->decide("warm", bucket(), 1, warm));
  c.command({"CONFIG", "RESETSTAT"});
  constexpr int n = 3000;
  tally t;
  hammer(*b, "y:", n, t);
  EXPECT_EQ(t.errors.load(), 0);
  for (int k = 0; k < keys; ++k) EXPECT_EQ(t.admitted[k].load(), static_cast<int>(capacity)) << k;
  EXPECT_EQ(stat_calls(c, "evalsha"), n);
}

TEST(RedisBatchTest, ALoneDecisionIsTheSingleKeyScript) {
  test::redis_server redis;
  test::redis_client c(redis.port());
  auto b = make(redis.url(), 32);
  decision d;
  ASSERT_FALSE(b->decide("warm", bucket(), 1, d));
  c.command({"CONFIG", "RESETSTAT"});
  for (int i = 0; i < 5; ++i) ASSERT_FALSE(b->decide("lone", bucket(), 1, d));
  EXPECT_EQ(d.remaining, capacity - 5);
  // One call per decision: nothing waited for company.
  EXPECT_EQ(stat_calls(c, "evalsha"), 5);
}

TEST(RedisBatchTest, BatchesAfterScriptFlushAreResentAsEval) {
  test::redis_server redis;
  test::redis_client c(redis.port());
  auto b = make(redis.url(), 32);
  decision warm;
  ASSERT_FALSE(b->decide("warm", bucket(), 1, warm));
  c.script_flush();
  c.command({"CONFIG", "RESETSTAT"});
  tally t;
  hammer(*b, "z:", 4000, t);
  EXPECT_EQ(t.errors.load(), 0);
  for (int k = 0; k < keys; ++k) EXPECT_EQ(t.admitted[k].load(), static_cast<int>(capacity)) << k;
  EXPECT_GT(stat_calls(c, "eval"), 0);  // the NOSCRIPT retries
}

TEST(RedisBatchTest, ABadKeyFailsOnlyItsOwnDecisions) {
  test::redis_server redis;
  test::redis_client c(redis.port());
  c.command({"SET", "sluice:bad", "not a state"});
  auto b = make(redis.url(), 32);
  decision warm;
  ASSERT_FALSE(b->decide("warm", bucket(), 1, warm));
  constexpr int n = 2000;
  countdown left(n);
  std::atomic<int> good_admitted{0}, good_errors{0}, bad_script_errors{0}, bad_other{0};
  for (int i = 0; i < n; ++i) {
    const bool bad = i % 4 == 0;
    b->async_decide(bad ? "bad" : "good", bucket(), 1, [&, bad](std::error_code ec, decision d) {
      if (bad) {
        (ec == errc::backend_script_error ? bad_script_errors : bad_other) += 1;
      } else if (ec) {
        ++good_errors;
      } else if (d.allowed) {
        ++good_admitted;
      }
      left.done();
    });
  }
  ASSERT_TRUE(left.wait(60s));
  EXPECT_EQ(bad_script_errors.load(), n / 4);
  EXPECT_EQ(bad_other.load(), 0);
  EXPECT_EQ(good_errors.load(), 0);
  EXPECT_EQ(good_admitted.load(), static_cast<int>(capacity));
}

// While Redis is frozen, decisions pile up behind the batches in flight; each still
// completes within its own timeout (plus a margin for a loaded machine), not after a
// timeout of waiting and another of its own call.
TEST(RedisBatchTest, WaitingDecisionsKeepTheirOwnDeadline) {
  test::redis_server redis;
  constexpr auto timeout = 1000ms;
  auto b = make(redis.url(), 32, timeout);
  decision warm;
  ASSERT_FALSE(b->decide("warm", bucket(), 1, warm));
  redis.pause();
  constexpr int n = 400;
  countdown left(n);
  std::atomic<long long> longest_ms{0};
  std::atomic<int> errors{0};
  for (int i = 0; i < n; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    b->async_decide("frozen:" + std::to_string(i % keys), bucket(), 1,
                    [&, t0](std::error_code ec, decision) {
                      const long long ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                               std::chrono::steady_clock::now() - t0)
                                               .count();
                      long long prev = longest_ms.load();
                      while (ms > prev && !longest_ms.compare_exchange_weak(prev, ms)) {
                      }
                      if (ec) ++errors;
                      left.done();
                    });
    if (i % 50 == 49) std::this_thread::sleep_for(50ms);  // later ones wait behind earlier
  }
  const bool all = left.wait(30s);
  redis.resume();
  ASSERT_TRUE(all);
  EXPECT_EQ(errors.load(), n);
  EXPECT_LT(longest_ms.load(), (timeout + 600ms).count());
}

}  // namespace
