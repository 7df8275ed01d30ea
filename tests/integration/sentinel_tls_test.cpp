// rediss+sentinel:// against redis-sentinel and data nodes that speak TLS (with
// `tls-replication yes`, so the sentinels monitor over TLS too) and have passwords of
// their own: TLS to the sentinels and to the master they name, both verified.
#include <gtest/gtest.h>

#include <sluice/redis_sentinel.hpp>
#include <sluice/sluice.hpp>

#include <chrono>
#include <string>
#include <thread>

#include "support/sentinel_fixture.hpp"
#include "support/test_pki.hpp"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

policy bucket(std::uint64_t capacity) {
  policy p;
  p.capacity = capacity;
  p.refill_per_second = min_refill_per_second;
  p.on_failure = failure_mode::closed;
  return p;
}

limiter make_limiter(const std::string& url) {
  redis_options o;
  o.url = url;
  o.command_timeout = 300ms;
  o.connect_timeout = 1000ms;
  o.reconnect_backoff_min = 10ms;
  o.reconnect_backoff_max = 200ms;
  return limiter(make_redis_backend(o.url, o));
}

decision first_healthy(limiter& lim, const std::string& key, std::chrono::milliseconds within) {
  const auto until = steady::now() + within;
  decision d;
  do {
    d = lim.check(key, bucket(3));
    if (!d.degraded) break;
    std::this_thread::sleep_for(20ms);
  } while (steady::now() < until);
  return d;
}

class SentinelTlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    pki_ = std::make_unique<test_pki>();
    redis_tls_files files;
    files.cert = pki_->server_cert();
    files.key = pki_->server_key();
    files.ca = pki_->ca();
    sentinel_group_options o;
    o.sentinel_password = "sentinel-secret";
    o.master_password = "master-secret";
    o.tls = files;
    group_ = std::make_unique<redis_sentinel_group>(1, o);
  }
  static void TearDownTestSuite() {
    group_.reset();
    pki_.reset();
  }
  static inline std::unique_ptr<test_pki> pki_;
  static inline std::unique_ptr<redis_sentinel_group> group_;
};

TEST_F(SentinelTlsTest, DiscoversTheMasterAndDecidesOverTls) {
  // rediss+sentinel://:master-secret@<sentinel TLS ports>/mymaster?sentinel_password=...
  const auto url = group_->url() + "&ca=" + pki_->ca();
  ASSERT_EQ(url.rfind("rediss+sentinel://", 0), 0u) << url;
  auto lim = make_limiter(url);
  const auto d = first_healthy(lim, "tls-disc", 10s);
  ASSERT_FALSE(d.degraded) << d.backend_error.message();
  EXPECT_EQ(d.remaining, 2u);
  // The sentinel named the master's TLS port, and the decision was written there.
  EXPECT_EQ(group_->master_port(), group_->data_node(0).tls_port());
  redis_client master(group_->data_node(0).port(), 2s, "master-secret");
  EXPECT_TRUE(master.get("sluice:tls-disc").has_value());
}

TEST_F(SentinelTlsTest, WrongCaFindsNoMaster) {
  auto lim = make_limiter(group_->url() + "&ca=" + pki_->other_ca());
  const auto d = first_healthy(lim, "tls-wrong-ca", 2500ms);
  EXPECT_TRUE(d.degraded);
  EXPECT_TRUE(is_backend_error(d.backend_error)) << d.backend_error.message();
}

}  // namespace
}  // namespace sluice::test
