// Multi-key decisions on a real Redis Cluster: keys of one slot (a shared hash tag) are one
// atomic script; keys on several slots are decided slot group by slot group, and a later
// group's denial gives the earlier groups their tokens back (never over-admitting).
#include <gtest/gtest.h>

#include <sluice/redis_cluster.hpp>
#include <sluice/sluice.hpp>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "redis/cluster/key_slot.hpp"
#include "support/cluster_fixture.hpp"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;
using redis::cluster::key_slot;

policy bucket(std::uint64_t capacity) {
  policy p;
  p.capacity = capacity;
  p.refill_per_second = min_refill_per_second;  // ~no refill while the test runs
  p.on_failure = failure_mode::closed;          // a failed call can only lower the counts
  return p;
}

backend_stats stats_of(const std::shared_ptr<backend>& b) {
  return b->stats();  // the public counters, as sluiced exports them
}

std::string key_on(const redis_cluster& cluster, std::size_t master, const std::string& base) {
  for (int i = 0;; ++i) {
    const std::string k = base + std::to_string(i);
    if (cluster.master_of(key_slot("sluice:" + k)) == master) return k;
  }
}

// Whole tokens stored for `key` on the master of its slot; a missing key is `full`.
std::int64_t tokens(redis_cluster& cluster, const std::string& key, std::int64_t full) {
  const std::string k = "sluice:" + key;
  auto v = cluster.client(cluster.master_of(key_slot(k))).get(k);
  return v ? std::stoll(v->substr(0, v->find(' '))) / 1'000'000 : full;
}

TEST(ClusterMultiTest, AtomicPerSlotAndRefundedAcrossSlots) {
  redis_cluster cluster;
  redis_options o;
  o.url = cluster.url();
  o.command_timeout = 2000ms;
  o.connect_timeout = 1000ms;
  auto b = make_redis_backend(o.url, o);
  limiter lim(b);
  const auto wide = bucket(10), narrow = bucket(2);
  lim.check("warm-up", wide);  // the slot map is there before anything is counted

  // One slot ({u1} is the hash tag): one script, all or nothing.
  const std::vector<check_item> same{{"{u1}:wide", wide, 1}, {"{u1}:narrow", narrow, 1}};
  ASSERT_EQ(key_slot("sluice:{u1}:wide"), key_slot("sluice:{u1}:narrow"));
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(all_allowed(lim.check_all(same)));
  for (int i = 0; i < 3; ++i) {
    const auto ds = lim.check_all(same);
    ASSERT_EQ(ds.size(), 2u);
    EXPECT_FALSE(ds[0].degraded);
    EXPECT_TRUE(ds[0].allowed);
    EXPECT_EQ(ds[0].remaining, 8u);
    EXPECT_FALSE(ds[1].allowed);
  }
  EXPECT_EQ(tokens(cluster, "{u1}:wide", 10), 8);
  EXPECT_EQ(stats_of(b).cross_slot, 0u);

  // Two masters: decided in list order; a denial by the second refunds the first.
  const auto masters = cluster.masters();
  const std::string x = key_on(cluster, masters[0], "x:"), y = key_on(cluster, masters[1], "y:");
  const std::vector<check_item> cross{{x, wide, 1}, {y, narrow, 1}};
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(all_allowed(lim.check_all(cross)));
  EXPECT_EQ(tokens(cluster, x, 10), 8);
  const auto denied = lim.check_all(cross);
  EXPECT_FALSE(all_allowed(denied));
  EXPECT_TRUE(denied[0].allowed);
  EXPECT_EQ(denied[0].remaining, 8u);  // reported as before the call
  EXPECT_FALSE(denied[1].allowed);
  EXPECT_GT(denied[1].retry_after, 999'000ms);
  // The refund is sent before the answer and lands right after it.
  for (int i = 0; i < 200 && stats_of(b).refunds == 0; ++i) std::this_thread::sleep_for(5ms);
  std::int64_t x_tokens = 0;
  for (int i = 0; i < 200 && (x_tokens = tokens(cluster, x, 10)) != 8; ++i) {
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_EQ(x_tokens, 8);
  auto s = stats_of(b);
  EXPECT_EQ(s.cross_slot, 3u);
  EXPECT_EQ(s.refunds, 1u);
  EXPECT_EQ(s.refund_failures, 0u);
  // The denying group first: the later group is not asked at all.
  const auto reversed = lim.check_all(std::vector<check_item>{{y, narrow, 1}, {x, wide, 1}});
  EXPECT_FALSE(reversed[0].allowed);
  EXPECT_TRUE(reversed[1].allowed);
  EXPECT_EQ(stats_of(b).refunds, 1u);
  EXPECT_EQ(tokens(cluster, x, 10), 8);

  // Concurrent pairs, same slot and across slots: exactly the smaller capacity is admitted
  // and the wider bucket ends with exactly what the admitted pairs took.
  const auto big = bucket(40), small = bucket(15);
  const std::string a = key_on(cluster, masters[2], "a:"), c = key_on(cluster, masters[0], "c:");
  for (const auto& [first, second] :
       std::vector<std::pair<std::string, std::string>>{{"{t}:big", "{t}:small"}, {a, c}}) {
    std::atomic<int> admitted{0}, degraded{0};
    {
      std::vector<std::jthread> threads;
      for (int t = 0; t < 8; ++t) {
        threads.emplace_back([&] {
          for (int i = 0; i < 6; ++i) {
            const auto ds =
                lim.check_all(std::vector<check_item>{{first, big, 1}, {second, small, 1}});
            for (const auto& d : ds) degraded += d.degraded ? 1 : 0;
            if (all_allowed(ds)) ++admitted;
          }
        });
      }
    }
    EXPECT_EQ(degraded.load(), 0) << first;
    EXPECT_EQ(admitted.load(), 15) << first;
    std::int64_t left = 0;
    for (int i = 0; i < 200 && (left = tokens(cluster, first, 40)) != 25; ++i) {
      std::this_thread::sleep_for(5ms);  // refunds still landing
    }
    EXPECT_EQ(left, 25) << first;
    EXPECT_EQ(tokens(cluster, second, 15), 0) << first;
  }
  EXPECT_EQ(stats_of(b).refund_failures, 0u);
}

}  // namespace
}  // namespace sluice::test
