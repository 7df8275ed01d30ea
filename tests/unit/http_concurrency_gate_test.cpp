// The middleware's concurrency rules (sluice/http/concurrency_gate.hpp) on the memory
// backend with a manual clock: a pass holds its slots until it is destroyed, a refusal
// gives back what it took and answers with Retry-After and a problem body.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <sluice/http/concurrency_gate.hpp>
#include <sluice/memory_backend.hpp>

namespace sluice::http {
namespace {

using std::chrono::milliseconds;

request_facts from(const std::string& ip, const std::string& path = "/reports/1") {
  request_facts f;
  f.peer = ip;
  f.method = "GET";
  f.path = path;
  f.host = "example.com";
  return f;
}

concurrency_rule rule(std::string name, std::string prefix, std::uint64_t limit,
                      const std::string& key = "ip") {
  concurrency_rule r;
  r.name = std::move(name);
  r.match.path_prefix = std::move(prefix);
  r.key = *key_spec::parse(key);
  r.policy = {limit, milliseconds{1000}, failure_mode::open};
  return r;
}

class ConcurrencyGateTest : public ::testing::Test {
 protected:
  std::shared_ptr<manual_clock> clock_ = std::make_shared<manual_clock>();
  std::shared_ptr<backend> mem_ = make_memory_backend({.time_source = clock_});
  limiter lim_{mem_, mem_};
};

TEST_F(ConcurrencyGateTest, APassHoldsItsSlotUntilItIsDestroyed) {
  const concurrency_gate gate(lim_, {rule("reports", "/reports", 2)});
  auto a = gate.enter(from("192.0.2.1"));
  auto b = gate.enter(from("192.0.2.1"));
  EXPECT_TRUE(a.admitted());
  EXPECT_TRUE(b.admitted());
  ASSERT_EQ(b.slots().size(), 1u);
  EXPECT_EQ(b.slots()[0].in_flight(), 2u);
  EXPECT_TRUE(gate.enter(from("192.0.2.2")).admitted()) << "another client has its own slots";
  EXPECT_TRUE(gate.enter(from("192.0.2.1", "/other")).admitted()) << "no rule matches";
  EXPECT_TRUE(gate.enter(from("192.0.2.1", "/other")).slots().empty());

  clock_->advance(milliseconds{250});
  const auto refused = gate.enter(from("192.0.2.1"));
  EXPECT_FALSE(refused.admitted());
  EXPECT_EQ(refused.response().status, 429u);
  ASSERT_EQ(refused.response().headers.size(), 1u);
  EXPECT_EQ(refused.response().headers[0].name, "Retry-After");
  EXPECT_EQ(refused.response().headers[0].value, "1") << "750 ms rounded up";
  const auto body = nlohmann::json::parse(refused.response().body);
  EXPECT_EQ(body["status"], 429);
  EXPECT_EQ(body["retry_after"], 1);
  EXPECT_NE(body["detail"].get<std::string>().find("\"reports\""), std::string::npos);

  { auto done = std::move(a); }  // the response of the first request was written
  EXPECT_TRUE(gate.enter(from("192.0.2.1")).admitted());
  b.release();
  b.release();  // harmless
  EXPECT_EQ(lim_.slot_stats().released, 4u);
}

TEST_F(ConcurrencyGateTest, ARefusalGivesBackTheSlotsOfEarlierRules) {
  const concurrency_gate gate(lim_, {rule("site", "/", 10), rule("reports", "/reports", 1)}, {},
                              503);
  auto holder = gate.enter(from("192.0.2.1"));
  ASSERT_TRUE(holder.admitted());
  EXPECT_EQ(holder.slots().size(), 2u);
  for (int i = 0; i < 20; ++i) {
    const auto r = gate.enter(from("192.0.2.1"));
    ASSERT_FALSE(r.admitted());
    EXPECT_EQ(r.response().status, 503u);
  }
  // Had each refusal kept its "site" slot, the tenth would have filled "site" too.
  EXPECT_TRUE(gate.enter(from("192.0.2.1", "/home")).admitted());
}

TEST_F(ConcurrencyGateTest, InvalidRulesAreRefusedWhenTheGateIsBuilt) {
  EXPECT_THROW(concurrency_gate(lim_, {rule("bad name", "/", 1)}), std::invalid_argument);
  EXPECT_THROW(concurrency_gate(lim_, {rule("a", "/", 1), rule("a", "/x", 1)}),
               std::invalid_argument);
  EXPECT_THROW(concurrency_gate(lim_, {rule("a", "/", 0)}), std::invalid_argument);
  EXPECT_THROW(concurrency_gate(lim_, {rule("a", "/", 1)}, {}, 200), std::invalid_argument);
}

TEST_F(ConcurrencyGateTest, ARequestWithoutAKeyIsNotLimitedByThatRule) {
  const concurrency_gate gate(lim_, {rule("keyed", "/", 1, "header:X-API-Key")});
  auto a = gate.enter(from("192.0.2.1"));
  auto b = gate.enter(from("192.0.2.1"));
  EXPECT_TRUE(a.admitted());
  EXPECT_TRUE(b.admitted());
  EXPECT_TRUE(b.slots().empty());
}

}  // namespace
}  // namespace sluice::http
