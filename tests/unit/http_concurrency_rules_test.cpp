// Concurrency rules inside a rule_set (a rule naming a concurrency policy): validated with
// the set, left out of evaluate() (rate rules), enforced by enter_concurrency() with the
// configured status, on the memory backend with a manual clock.
#include <gtest/gtest.h>

#include <sluice/http/concurrency_gate.hpp>
#include <sluice/http/evaluate.hpp>
#include <sluice/memory_backend.hpp>

namespace sluice::http {
namespace {

using std::chrono::milliseconds;
using policies = std::map<std::string, sluice::policy, std::less<>>;
using slot_policies = std::map<std::string, concurrency_policy, std::less<>>;

request_facts from(const std::string& ip, const std::string& path) {
  request_facts f;
  f.peer = ip;
  f.method = "GET";
  f.path = path;
  f.host = "example.com";
  return f;
}

rule make_rule(std::string name, std::string prefix, std::string policy) {
  rule r;
  r.name = std::move(name);
  r.match.path_prefix = std::move(prefix);
  r.key = *key_spec::parse("ip");
  r.policy = std::move(policy);
  return r;
}

std::string error_of(policies p, slot_policies c, std::vector<rule> rules) {
  try {
    rule_set set(std::move(p), std::move(c), std::move(rules));
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

class HttpConcurrencyRulesTest : public ::testing::Test {
 protected:
  std::shared_ptr<manual_clock> clock_ = std::make_shared<manual_clock>();
  std::shared_ptr<backend> mem_ = make_memory_backend({.time_source = clock_});
  limiter lim_{mem_, mem_};

  std::shared_ptr<const rule_set> set_ = std::make_shared<const rule_set>(
      policies{{"api", {.capacity = 10, .refill_per_second = 1}}},
      slot_policies{{"reports", {.limit = 1, .lease_ttl = milliseconds{60'000}}}},
      std::vector<rule>{make_rule("reports", "/reports/", "reports"),
                        make_rule("api", "/", "api")});
};

TEST_F(HttpConcurrencyRulesTest, ARequestHoldsTheRulesSlotUntilItsPassEnds) {
  auto first = enter_concurrency(lim_, *set_, from("192.0.2.1", "/reports/1"));
  ASSERT_TRUE(first.admitted());
  ASSERT_EQ(first.slots().size(), 1u);

  auto second = enter_concurrency(lim_, *set_, from("192.0.2.1", "/reports/2"), 503);
  EXPECT_FALSE(second.admitted());
  EXPECT_EQ(second.response().status, 503u);
  bool retry_after = false;
  for (const auto& h : second.response().headers) {
    if (h.name == "Retry-After") retry_after = std::stoi(h.value) >= 1;
  }
  EXPECT_TRUE(retry_after) << "a refusal says when to come back";
  EXPECT_NE(second.response().body.find("reports"), std::string::npos) << "names the rule";

  EXPECT_TRUE(enter_concurrency(lim_, *set_, from("192.0.2.2", "/reports/1")).admitted())
      << "another client, another key";
  first.release();
  EXPECT_TRUE(enter_concurrency(lim_, *set_, from("192.0.2.1", "/reports/3")).admitted());
}

TEST_F(HttpConcurrencyRulesTest, EvaluateLeavesConcurrencyRulesToEnterConcurrency) {
  auto pass = enter_concurrency(lim_, *set_, from("192.0.2.1", "/reports/1"));
  ASSERT_TRUE(pass.admitted());
  const auto e = evaluate(lim_, set_, from("192.0.2.1", "/reports/1"));
  EXPECT_TRUE(e.allowed) << "a held slot is not a rate denial";
  ASSERT_EQ(e.outcomes.size(), 1u) << "only the rate rule is decided";
  EXPECT_EQ(e.outcomes[0].rule, "api");
  EXPECT_EQ(e.outcomes[0].result.remaining, 9u);

  EXPECT_TRUE(enter_concurrency(lim_, *set_, from("192.0.2.1", "/other")).admitted());
  EXPECT_TRUE(enter_concurrency(lim_, *set_, from("192.0.2.1", "/other")).slots().empty())
      << "no concurrency rule matches: nothing held";
}

TEST_F(HttpConcurrencyRulesTest, TheSetRefusesWhatAConcurrencyRuleCannotMean) {
  const slot_policies reports{{"reports", {.limit = 2}}};
  auto shadow = make_rule("r", "/", "reports");
  shadow.shadow = true;
  EXPECT_EQ(error_of({}, reports, {shadow}),
            "rule \"r\": a concurrency rule cannot be a shadow rule");
  auto costly = make_rule("r", "/", "reports");
  costly.cost = 2;
  EXPECT_EQ(error_of({}, reports, {costly}),
            "rule \"r\": a concurrency rule takes one slot: cost must be 1");
  EXPECT_EQ(error_of({{"reports", {.capacity = 1, .refill_per_second = 1}}}, reports, {}),
            "policy \"reports\": both a rate and a concurrency policy");
  EXPECT_NE(error_of({}, {{"r", {.limit = 0}}}, {}).find("policy \"r\": "), std::string::npos);
  EXPECT_EQ(error_of({}, reports, {make_rule("r", "/", "nope")}),
            "rule \"r\": unknown policy \"nope\"");
  EXPECT_EQ(error_of({}, reports, {make_rule("r", "/", "reports")}), "") << "valid";
}

}  // namespace
}  // namespace sluice::http
