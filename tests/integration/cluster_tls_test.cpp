// rediss+cluster:// on a real TLS Redis Cluster (3 masters, `--tls-cluster yes`): the
// client learns the nodes' TLS ports from CLUSTER SLOTS over TLS, verifies every node,
// and decides exactly on the master that owns each key.
#include <gtest/gtest.h>

#include <sluice/redis_cluster.hpp>
#include <sluice/sluice.hpp>

#include <atomic>
#include <chrono>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "redis/cluster/key_slot.hpp"
#include "support/cluster_fixture.hpp"
#include "support/test_pki.hpp"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;
using redis::cluster::key_slot;
using steady = std::chrono::steady_clock;

policy bucket(std::uint64_t capacity) {
  policy p;
  p.capacity = capacity;
  p.refill_per_second = min_refill_per_second;
  p.on_failure = failure_mode::closed;
  return p;
}

class ClusterTlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    pki_ = std::make_unique<test_pki>();
    redis_tls_files files;
    files.cert = pki_->server_cert();
    files.key = pki_->server_key();
    files.ca = pki_->ca();
    redis_cluster_options o;
    o.replicas_per_master = 0;
    o.tls = files;
    cluster_ = std::make_unique<redis_cluster>(o);
  }
  static void TearDownTestSuite() {
    cluster_.reset();
    pki_.reset();
  }
  static limiter make_limiter(const std::string& query) {
    redis_options o;
    o.url = cluster_->url() + query;
    o.command_timeout = 1000ms;
    o.connect_timeout = 1000ms;
    return limiter(make_redis_backend(o.url, o));
  }
  static inline std::unique_ptr<test_pki> pki_;
  static inline std::unique_ptr<redis_cluster> cluster_;
};

TEST_F(ClusterTlsTest, ExactOnEveryMasterOverTls) {
  auto lim = make_limiter("?ca=" + pki_->ca());
  // The first call may meet the slot map being fetched.
  const auto until = steady::now() + 10s;
  while (lim.check("warm", bucket(1'000'000)).degraded && steady::now() < until)
    std::this_thread::sleep_for(20ms);

  constexpr std::uint64_t capacity = 4;
  std::set<std::size_t> masters;
  for (int k = 0; k < 24; ++k) {
    const std::string key = "tls-key-" + std::to_string(k);
    int allowed = 0;
    for (int i = 0; i < 6; ++i) {
      const auto d = lim.check(key, bucket(capacity));
      ASSERT_FALSE(d.degraded) << key << ": " << d.backend_error.message();
      if (d.allowed) ++allowed;
    }
    EXPECT_EQ(allowed, static_cast<int>(capacity)) << key;
    // Written on the node that owns the key's slot (read through its plain port).
    const auto owner = cluster_->master_of(key_slot("sluice:" + key));
    EXPECT_TRUE(cluster_->client(owner).get("sluice:" + key).has_value()) << key;
    masters.insert(owner);
  }
  EXPECT_EQ(masters.size(), 3u) << "the keys should have covered every master";
}

TEST_F(ClusterTlsTest, ConcurrentCallersOnOneKeyAdmitExactlyTheCapacity) {
  auto lim = make_limiter("?ca=" + pki_->ca());
  const auto until = steady::now() + 10s;
  while (lim.check("warm2", bucket(1'000'000)).degraded && steady::now() < until)
    std::this_thread::sleep_for(20ms);
  constexpr std::uint64_t capacity = 60;
  std::atomic<int> allowed{0}, degraded{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < 4; ++t) {
    pool.emplace_back([&] {
      for (int i = 0; i < 30; ++i) {
        const auto d = lim.check("tls-shared", bucket(capacity));
        if (d.degraded) ++degraded;
        if (d.allowed) ++allowed;
      }
    });
  }
  for (auto& t : pool) t.join();
  EXPECT_EQ(degraded.load(), 0);
  EXPECT_EQ(allowed.load(), static_cast<int>(capacity));
}

TEST_F(ClusterTlsTest, WrongCaDecidesNothing) {
  auto lim = make_limiter("?ca=" + pki_->other_ca());
  for (int i = 0; i < 10; ++i) {
    const auto t0 = steady::now();
    const auto d = lim.check("tls-wrong-ca", bucket(5));
    EXPECT_LT(steady::now() - t0, 3s) << "check " << i << " hung";
    ASSERT_TRUE(d.degraded) << "check " << i << " decided with an untrusted cluster";
    EXPECT_FALSE(d.allowed);  // closed
    std::this_thread::sleep_for(20ms);
  }
}

}  // namespace
}  // namespace sluice::test
