// Sentinels with their own password (`requirepass` in redis-sentinel's config) in front
// of a master with a different one: the URL's user info is the master's, and
// `?sentinel_password=` is the sentinels'. Both are needed, and neither stands in for the
// other.
#include <gtest/gtest.h>

#include <sluice/redis_sentinel.hpp>
#include <sluice/sluice.hpp>

#include <chrono>
#include <string>
#include <thread>

#include "support/sentinel_fixture.hpp"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

constexpr const char* sentinel_pw = "sentinel-secret";
constexpr const char* master_pw = "master-secret";

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
  o.command_timeout = 200ms;
  o.connect_timeout = 1000ms;
  o.reconnect_backoff_min = 10ms;
  o.reconnect_backoff_max = 200ms;
  return limiter(make_redis_backend(o.url, o));
}

// Polls for up to `within`; the first decision Redis made, or the last degraded one.
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

class SentinelAuthTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    sentinel_group_options o;
    o.sentinel_password = sentinel_pw;
    o.master_password = master_pw;
    group_ = std::make_unique<redis_sentinel_group>(1, o);
  }
  static void TearDownTestSuite() { group_.reset(); }
  static std::string url(const std::string& userinfo, const std::string& query) {
    return "redis+sentinel://" + userinfo + group_->hosts() + "/mymaster" + query;
  }
  static inline std::unique_ptr<redis_sentinel_group> group_;
};

TEST_F(SentinelAuthTest, TheSentinelRefusesClientsWithoutItsPassword) {
  // The fixture really protects the sentinel: the test below would prove nothing otherwise.
  redis_client anonymous(group_->sentinel_port(0));
  auto r = anonymous.command({"SENTINEL", "get-master-addr-by-name", "mymaster"});
  ASSERT_TRUE(redis::is_error(*r));
  EXPECT_NE(std::string(redis::reply_text(*r)).find("NOAUTH"), std::string::npos);
}

TEST_F(SentinelAuthTest, BothPasswordsDiscoverTheMasterAndDecide) {
  auto lim = make_limiter(
      url(std::string(":") + master_pw + "@", std::string("?sentinel_password=") + sentinel_pw));
  const auto d = first_healthy(lim, "both", 10s);
  ASSERT_FALSE(d.degraded) << d.backend_error.message();
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, 2u);
  redis_client master(group_->data_node(0).port(), 2s, master_pw);
  EXPECT_TRUE(master.get("sluice:both").has_value());  // written on the master
}

TEST_F(SentinelAuthTest, WithoutTheSentinelPasswordNoMasterIsFound) {
  // The master's password alone: the sentinels refuse to say where the master is.
  auto lim = make_limiter(url(std::string(":") + master_pw + "@", ""));
  const auto d = first_healthy(lim, "no-sentinel-pw", 2500ms);  // > the 1 s sentinel poll
  EXPECT_TRUE(d.degraded);
  EXPECT_EQ(d.backend_error, errc::backend_unavailable) << d.backend_error.message();
}

TEST_F(SentinelAuthTest, AWrongSentinelPasswordFindsNoMaster) {
  auto lim = make_limiter(url(std::string(":") + master_pw + "@", "?sentinel_password=wrong"));
  const auto d = first_healthy(lim, "wrong-sentinel-pw", 2500ms);
  EXPECT_TRUE(d.degraded);
  EXPECT_TRUE(is_backend_error(d.backend_error)) << d.backend_error.message();
}

TEST_F(SentinelAuthTest, TheSentinelPasswordIsNotTheMasters) {
  // The sentinels answer, but the master refuses AUTH-less connections.
  auto lim = make_limiter(url("", std::string("?sentinel_password=") + sentinel_pw));
  const auto d = first_healthy(lim, "no-master-pw", 2500ms);
  EXPECT_TRUE(d.degraded);
  EXPECT_TRUE(is_backend_error(d.backend_error)) << d.backend_error.message();
}

}  // namespace
}  // namespace sluice::test
