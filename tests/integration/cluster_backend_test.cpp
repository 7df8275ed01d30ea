// The Redis Cluster backend on a real 3-master + 3-replica cluster: exactness, keys spread
// over every master, NOSCRIPT per node, a slot migrated under load and a master killed
// under load.
#include <gtest/gtest.h>

#include <sluice/redis_cluster.hpp>
#include <sluice/sluice.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "redis/cluster/key_slot.hpp"
#include "support/cluster_fixture.hpp"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;
using redis::cluster::key_slot;
using steady = std::chrono::steady_clock;

policy bucket(std::uint64_t capacity, failure_mode mode = failure_mode::closed) {
  policy p;
  p.capacity = capacity;
  p.refill_per_second = min_refill_per_second;  // ~no refill while a test runs
  p.on_failure = mode;
  return p;
}

redis_options options_for(const redis_cluster& cluster,
                          std::chrono::milliseconds command_timeout = 1000ms) {
  redis_options o;
  o.url = cluster.url();
  // Generous: these builds are Debug and share two cores with other test runs; a timeout
  // would show up as an error, which the exactness tests count as a failure.
  o.command_timeout = command_timeout;
  o.connect_timeout = 1000ms;
  return o;
}

backend_stats stats_of(const std::shared_ptr<backend>& b) {
  return b->stats();  // the public counters, as sluiced exports them
}

// A key (with the given prefix) whose slot is served by node `master`.
std::string key_on(const redis_cluster& cluster, std::size_t master, const std::string& base,
                   const std::string& prefix = "sluice:") {
  for (int i = 0;; ++i) {
    const std::string k = base + std::to_string(i);
    if (cluster.master_of(key_slot(prefix + k)) == master) return k;
  }
}

// Many async decisions, waited for together.
class batch {
 public:
  explicit batch(std::shared_ptr<backend> b) : b_(std::move(b)) {}
  void add(const std::string& key, const policy& p) {
    {
      std::lock_guard lock(mu_);
      ++pending_;
    }
    b_->async_decide(key, p, 1, [this](std::error_code ec, decision d) {
      std::lock_guard lock(mu_);
      if (ec) {
        errors_.push_back(ec);
      } else if (d.allowed) {
        ++allowed_;
      }
      if (--pending_ == 0) cv_.notify_all();
    });
  }
  void wait() {
    std::unique_lock lock(mu_);
    ASSERT_TRUE(cv_.wait_for(lock, 60s, [&] { return pending_ == 0; }));
  }
  std::size_t allowed() const { return allowed_; }
  const std::vector<std::error_code>& errors() const { return errors_; }

 private:
  std::shared_ptr<backend> b_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::size_t pending_ = 0;
  std::size_t allowed_ = 0;
  std::vector<std::error_code> errors_;
};

TEST(ClusterBackendTest, ConcurrentCallersAdmitExactlyTheCapacityOnEveryMaster) {
  redis_cluster cluster;
  auto lim = limiter(make_redis_backend(cluster.url(), options_for(cluster)));
  const auto masters = cluster.masters();
  ASSERT_EQ(masters.size(), 3u);
  for (const auto m : masters) {
    const std::string key = key_on(cluster, m, "exact:");
    std::atomic<int> allowed{0}, degraded{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 50; ++t) {
      threads.emplace_back([&] {
        for (int i = 0; i < 4; ++i) {
          const auto d = lim.check(key, bucket(10));
          allowed += d.allowed ? 1 : 0;
          degraded += d.degraded ? 1 : 0;
        }
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(degraded.load(), 0) << "master " << m;
    EXPECT_EQ(allowed.load(), 10) << "200 callers on " << key << " (master " << m << ")";
    // The state lives on the master that owns the slot, and nowhere else.
    EXPECT_TRUE(cluster.client(m).get("sluice:" + key).has_value());
  }
}

TEST(ClusterBackendTest, ThousandsOfKeysSpreadOverAllMasters) {
  redis_cluster cluster;
  auto b = make_redis_backend(cluster.url(), options_for(cluster));
  constexpr int keys = 3000;
  batch all(b);
  for (int i = 0; i < keys; ++i) all.add("user:" + std::to_string(i), bucket(5));
  all.wait();
  EXPECT_TRUE(all.errors().empty())
      << all.errors().size() << " errors, first: " << all.errors().front().message();
  EXPECT_EQ(all.allowed(), static_cast<std::size_t>(keys));

  long long total = 0;
  for (const auto m : cluster.masters()) {
    const auto n = cluster.client(m).command({"DBSIZE"})->integer;
    EXPECT_GT(n, keys / 5) << "master " << m << " got too few keys";
    total += n;
  }
  EXPECT_EQ(total, keys);
  // Each key sits in the slot our CRC16 computed, on the master of that slot.
  for (int i = 0; i < keys; i += 97) {
    const std::string full = "sluice:user:" + std::to_string(i);
    const auto slot = key_slot(full);
    auto c = cluster.client(cluster.master_of(slot));
    EXPECT_GE(c.command({"CLUSTER", "COUNTKEYSINSLOT", std::to_string(slot)})->integer, 1);
    EXPECT_TRUE(c.get(full).has_value()) << full;
  }
  // Calls made before the first slot map arrived went to a seed and were redirected; once
  // the map is known, each call goes straight to its owner.
  const auto moved_before = stats_of(b).moved;
  batch again(b);
  for (int i = 0; i < keys; ++i) again.add("user:" + std::to_string(i), bucket(5));
  again.wait();
  EXPECT_TRUE(again.errors().empty());
  EXPECT_EQ(again.allowed(), static_cast<std::size_t>(keys));
  EXPECT_EQ(stats_of(b).moved, moved_before);
}

TEST(ClusterBackendTest, ScriptsAreLoadedPerNodeOnNoscript) {
  redis_cluster cluster;
  auto b = make_redis_backend(cluster.url(), options_for(cluster));
  std::vector<std::string> keys;
  for (const auto m : cluster.masters()) keys.push_back(key_on(cluster, m, "ns:"));
  decision d;
  for (const auto& k : keys) ASSERT_FALSE(b->decide(k, bucket(5), 1, d)) << k;
  for (const auto m : cluster.masters()) cluster.client(m).script_flush();
  for (const auto& k : keys) {
    ASSERT_FALSE(b->decide(k, bucket(5), 1, d)) << k;
    EXPECT_TRUE(d.allowed);
    EXPECT_EQ(d.remaining, 3u);
  }
  EXPECT_EQ(stats_of(b).noscript, 3u);
}

TEST(ClusterBackendTest, FromUrlAndPrefixWithHashTags) {
  redis_cluster cluster;
  auto lim = limiter_from_url(cluster.url());
  // Default options: a 50 ms command timeout, which the first call (slot map, connection,
  // NOSCRIPT then EVAL) can miss on a loaded machine under a sanitizer; such a call is
  // degraded, and what this test asks is where the key lands, so it tries again.
  decision d;
  for (int i = 0; i < 20; ++i) {
    d = lim.check("{tenant9}:login", bucket(3));
    if (!d.degraded) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(d.allowed);
  EXPECT_FALSE(d.degraded) << d.backend_error.message();
  // Keys sharing a tag share a slot, so a multi-key script could use them together.
  EXPECT_EQ(key_slot("sluice:{tenant9}:login"), key_slot("sluice:{tenant9}:api"));
  auto c = cluster.client(cluster.master_of(key_slot("sluice:{tenant9}:login")));
  EXPECT_TRUE(c.get("sluice:{tenant9}:login").has_value());
}

// Load on a set of keys, counting every outcome, until stopped.
struct load {
  load(std::shared_ptr<backend> b, std::vector<std::string> keys, policy p, int threads)
      : b_(std::move(b)), keys_(std::move(keys)), p_(p), allowed_(keys_.size()) {
    for (auto& a : allowed_) a = 0;
    for (int t = 0; t < threads; ++t) {
      threads_.emplace_back([this, t] {
        std::minstd_rand rng(static_cast<unsigned>(t + 1));
        while (!stop_.load()) {
          const std::size_t k = rng() % keys_.size();
          decision d;
          const auto start = steady::now();
          const auto ec = b_->decide(keys_[k], p_, 1, d);
          const auto took = steady::now() - start;
          {
            std::lock_guard lock(mu_);
            longest_ = std::max(longest_, took);
            ++calls_;
            if (ec) errors_.push_back(ec);
          }
          if (!ec && d.allowed) ++allowed_[k];
        }
      });
    }
  }
  void stop() {
    stop_ = true;
    for (auto& t : threads_) t.join();
    threads_.clear();
  }
  ~load() { stop(); }

  std::shared_ptr<backend> b_;
  std::vector<std::string> keys_;
  policy p_;
  std::vector<std::atomic<std::uint64_t>> allowed_;
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::vector<std::error_code> errors_;
  std::size_t calls_ = 0;
  steady::duration longest_{};
};

// Moves the slot of twenty hash-tagged keys from one master to another while `threads`
// callers decide on them; `after`: the backend's counters after the run.
void migrate_under_load(int threads, backend_stats& after) {
  redis_cluster cluster;
  auto b = make_redis_backend(cluster.url(), options_for(cluster));
  // Twenty keys in one slot (a hash tag), partly spent before, during and after the move.
  std::vector<std::string> keys;
  for (int i = 0; i < 20; ++i) keys.push_back("{hot}:k" + std::to_string(i));
  const std::uint16_t slot = key_slot("sluice:{hot}:k0");
  const auto from = cluster.master_of(slot);
  std::size_t to =
      cluster.masters().front() == from ? cluster.masters().back() : cluster.masters().front();
  constexpr std::uint64_t capacity = 1'000'000;
  const auto p = bucket(capacity);
  {
    load l(b, keys, p, threads);
    std::this_thread::sleep_for(300ms);  // every key exists on the source before the move
    cluster.begin_migration(slot, from, to);
    // One key at a time with pauses: callers see keys on both sides (ASK) for a while.
    EXPECT_EQ(cluster.migrate_keys(slot, from, to, 1, 30ms), keys.size());
    cluster.finish_migration(slot, from, to);
    std::this_thread::sleep_for(300ms);  // and then the new owner only (MOVED, new map)
    l.stop();
    EXPECT_TRUE(l.errors_.empty()) << l.errors_.size() << " of " << l.calls_
                                   << " calls failed, first: " << l.errors_.front().message();
    EXPECT_GT(l.calls_, 200u);
    const auto s = stats_of(b);
    EXPECT_GT(s.ask, 0u) << "no call met the half-migrated slot";
    EXPECT_GT(s.moved, 0u) << "no call met the moved slot";
    // No over-admission and no lost state: each bucket holds exactly what was not spent,
    // on the new owner.
    auto dst = cluster.client(to);
    for (std::size_t k = 0; k < keys.size(); ++k) {
      decision d;
      ASSERT_FALSE(b->decide(keys[k], p, 1, d));
      EXPECT_TRUE(d.allowed);
      EXPECT_EQ(d.remaining, capacity - l.allowed_[k].load() - 1) << keys[k];
      EXPECT_TRUE(dst.get("sluice:" + keys[k]).has_value());
    }
    after = stats_of(b);
    std::cout << "[ migration ] " << l.calls_ << " calls, " << s.ask << " ASK, " << s.moved
              << " MOVED, longest call "
              << std::chrono::duration_cast<std::chrono::microseconds>(l.longest_).count()
              << " us, " << after.batched_decisions << " decisions in " << after.script_calls
              << " script calls\n";
  }
}

TEST(ClusterBackendTest, SlotMigratedUnderLoadWithoutErrorsOrOverAdmission) {
  backend_stats s;
  migrate_under_load(4, s);
}

// Sixteen callers on one slot keep its master busy, so their decisions travel in shared
// script calls; a call whose keys are partly moved meets TRYAGAIN and is split, each
// decision answered alone (or sent on with ASK): still no error and no over-admission.
TEST(ClusterBackendTest, SameSlotBatchesAreSplitWhileTheirSlotMigrates) {
  backend_stats s;
  migrate_under_load(16, s);
  EXPECT_GT(s.batched_decisions, s.script_calls) << "no two decisions shared a script call";
}

// Decisions on one slot that arrive together share script calls (lua/decide_batch.lua), each
// decided exactly as alone: every key admits its capacity, no more.
TEST(ClusterBackendTest, SameSlotDecisionsShareScriptCallsAndStayExact) {
  redis_cluster cluster;
  auto b = make_redis_backend(cluster.url(), options_for(cluster));
  const auto p = bucket(50);
  std::vector<std::string> keys;
  for (int i = 0; i < 10; ++i) keys.push_back("{tenant}:k" + std::to_string(i));
  for (const auto m : cluster.masters()) keys.push_back(key_on(cluster, m, "spread:"));
  // Batching is per node, by the slot map: before the first map arrives, decisions go to a
  // seed one by one and follow its MOVED (on a loaded machine, all 1300 of them could).
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (!stats_of(b).up && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(1ms);
  }
  ASSERT_TRUE(stats_of(b).up) << "no slot map within 10 s";
  batch all(b);
  for (int round = 0; round < 100; ++round) {
    for (const auto& k : keys) all.add(k, p);
  }
  all.wait();
  EXPECT_TRUE(all.errors().empty()) << all.errors().front().message();
  EXPECT_EQ(all.allowed(), 50 * keys.size());
  for (const auto& k : keys) {
    decision d;
    ASSERT_FALSE(b->decide(k, p, 1, d));
    EXPECT_FALSE(d.allowed) << k << " admitted more than its capacity";
  }
  const auto s = stats_of(b);
  EXPECT_GT(s.batched_decisions, s.script_calls) << "no two decisions shared a script call";
  std::cout << "[ same slot ] " << s.batched_decisions << " decisions in " << s.script_calls
            << " script calls\n";
}

TEST(ClusterBackendTest, MasterKilledUnderLoadFailsOverWithinBoundedTime) {
  redis_cluster cluster;  // cluster-node-timeout 1000 ms
  const auto command_timeout = 200ms;
  auto lim = std::make_shared<limiter>(
      make_redis_backend(cluster.url(), options_for(cluster, command_timeout)));
  // One key per master; the victim is the first master's.
  const auto masters = cluster.masters();
  std::vector<std::string> keys;
  for (const auto m : masters) keys.push_back(key_on(cluster, m, "fo:"));
  const std::uint16_t victim_slot = key_slot("sluice:" + keys[0]);
  const auto p = bucket(1'000'000'000, failure_mode::open);
  for (const auto& k : keys) ASSERT_FALSE(lim->check(k, p).degraded);

  std::atomic<bool> stop{false};
  std::mutex mu;
  std::vector<std::uint64_t> degraded(keys.size()), ok(keys.size());
  steady::duration longest{};
  steady::time_point last_degraded_victim{};
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      std::size_t i = static_cast<std::size_t>(t);
      while (!stop.load()) {
        const std::size_t k = i++ % keys.size();
        const auto start = steady::now();
        const auto d = lim->check(keys[k], p);
        const auto end = steady::now();
        std::lock_guard lock(mu);
        longest = std::max(longest, end - start);
        // The failure mode decided: open means allowed, marked degraded.
        EXPECT_TRUE(d.allowed);
        if (d.degraded) {
          ++degraded[k];
          if (k == 0) last_degraded_victim = end;
        } else {
          ++ok[k];
        }
      }
    });
  }
  std::this_thread::sleep_for(200ms);
  const auto killed_at = steady::now();
  const auto old_master = cluster.kill_master_of(victim_slot);
  const auto new_master = cluster.wait_for_failover(victim_slot, old_master, 30s);
  const auto promoted_at = steady::now();
  // Served again from the promoted replica: wait for undegraded decisions on the victim.
  const auto ok_before = [&] {
    std::lock_guard lock(mu);
    return ok[0];
  }();
  const auto until = steady::now() + 10s;
  for (;;) {
    {
      std::lock_guard lock(mu);
      if (ok[0] > ok_before + 10) break;
    }
    ASSERT_LT(steady::now(), until) << "not served from the promoted replica";
    std::this_thread::sleep_for(5ms);
  }
  stop = true;
  for (auto& t : threads) t.join();

  EXPECT_NE(new_master, old_master);
  EXPECT_GT(degraded[0], 0u) << "the window was not seen at all";
  // Other masters kept serving (cluster-require-full-coverage no).
  for (std::size_t k = 1; k < keys.size(); ++k) EXPECT_GT(ok[k], 0u);
  const auto recovered_after = last_degraded_victim - killed_at;
  const auto after_promotion = last_degraded_victim - promoted_at;
  EXPECT_LT(recovered_after, 15s);
  // Nothing hangs: every call ended near its deadline at worst.
  EXPECT_LT(longest, command_timeout + 800ms);
  std::cout << "[ failover  ] degraded on the victim: " << degraded[0] << ", last degraded "
            << std::chrono::duration_cast<std::chrono::milliseconds>(recovered_after).count()
            << " ms after the kill ("
            << std::chrono::duration_cast<std::chrono::milliseconds>(after_promotion).count()
            << " ms after the promotion was visible), longest call "
            << std::chrono::duration_cast<std::chrono::milliseconds>(longest).count() << " ms\n";
}

}  // namespace
}  // namespace sluice::test
