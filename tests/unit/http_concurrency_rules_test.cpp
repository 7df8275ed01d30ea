// Concurrency rules inside a rule_set (a rule naming a concurrency policy): validated with
// the set, left out of evaluate() (rate rules), enforced by enter_concurrency() with the
// configured status, on the memory backend with a manual clock; async_enter_concurrency:
// completes on the handler's executor, never inline; a refusal gives back the slots of the
// rules before it; a rule's max_wait is served by a release.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <optional>
#include <thread>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_future.hpp>

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

rule make_rule(std::string name, std::string prefix, std::string policy,
               milliseconds max_wait = milliseconds{0}) {
  rule r;
  r.name = std::move(name);
  r.match.path_prefix = std::move(prefix);
  r.key = *key_spec::parse("ip");
  r.policy = std::move(policy);
  r.max_wait = max_wait;
  return r;
}

// What an async enter completed with, and where.
struct completion {
  bool ran = false;
  bool on_strand = false;
  std::error_code ec;
  std::optional<gate_pass> pass;
};

// async_enter_concurrency with its handler bound to `strand`; `c` records the completion.
template <class Strand>
void enter_async(limiter& lim, const rule_set& set, const request_facts& req, Strand& strand,
                 completion& c, unsigned deny_status = 429) {
  async_enter_concurrency(
      lim, set, req, deny_status,
      boost::asio::bind_executor(strand, [&c, &strand](std::error_code ec, gate_pass p) {
        c.ran = true;
        c.on_strand = strand.running_in_this_thread();
        c.ec = ec;
        c.pass = std::move(p);
      }));
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
  EXPECT_EQ(error_of({}, reports, {make_rule("r", "/", "reports", milliseconds{600'001})}),
            "rule \"r\": max_wait must be 0..600000 ms, not 600001");
  EXPECT_EQ(error_of({}, reports, {make_rule("r", "/", "reports", milliseconds{-1})}),
            "rule \"r\": max_wait must be 0..600000 ms, not -1");
  EXPECT_EQ(error_of({{"api", {.capacity = 1, .refill_per_second = 1}}}, reports,
                     {make_rule("r", "/", "api", milliseconds{10})}),
            "rule \"r\": max_wait is for concurrency rules; a rate rule does not wait");
  EXPECT_EQ(error_of({}, reports, {make_rule("r", "/", "reports", max_gate_wait)}), "") << "valid";
}

TEST_F(HttpConcurrencyRulesTest, AsyncEnterCompletesOnTheHandlersExecutorNeverInline) {
  boost::asio::io_context io;
  auto strand = boost::asio::make_strand(io);
  // A slot to take, a refusal, and nothing to take at all: each is posted, none inline
  // (the memory backend answers inline, so only the post keeps it from running here).
  completion admitted, refused, nothing;
  enter_async(lim_, *set_, from("192.0.2.1", "/reports/1"), strand, admitted);
  enter_async(lim_, *set_, from("192.0.2.1", "/reports/2"), strand, refused, 503);
  enter_async(lim_, *set_, from("192.0.2.1", "/other"), strand, nothing);
  EXPECT_FALSE(admitted.ran);
  EXPECT_FALSE(refused.ran);
  EXPECT_FALSE(nothing.ran);

  io.run();
  for (auto* c : {&admitted, &refused, &nothing}) {
    ASSERT_TRUE(c->ran);
    EXPECT_TRUE(c->on_strand) << "on the handler's associated executor";
    EXPECT_FALSE(c->ec);
    ASSERT_TRUE(c->pass);
  }
  EXPECT_TRUE(admitted.pass->admitted());
  ASSERT_EQ(admitted.pass->slots().size(), 1u);
  EXPECT_EQ(admitted.pass->slots()[0].key(), "@gate:reports:ip=192.0.2.1");
  EXPECT_FALSE(refused.pass->admitted());
  EXPECT_EQ(refused.pass->response().status, 503u);
  ASSERT_EQ(refused.pass->response().headers.size(), 1u);
  EXPECT_EQ(refused.pass->response().headers[0].name, "Retry-After");
  EXPECT_NE(refused.pass->response().body.find("reports"), std::string::npos);
  EXPECT_TRUE(nothing.pass->admitted());
  EXPECT_TRUE(nothing.pass->slots().empty());

  // Any completion token: a future (its handler's executor is the system executor).
  admitted.pass->release();
  auto f = async_enter_concurrency(lim_, *set_, from("192.0.2.1", "/reports/3"), 429,
                                   boost::asio::use_future);
  auto [ec, pass] = f.get();
  EXPECT_FALSE(ec);
  EXPECT_TRUE(pass.admitted());
}

TEST_F(HttpConcurrencyRulesTest, ARefusalOfTheSecondRuleGivesBackTheFirstRulesSlot) {
  const auto set = std::make_shared<const rule_set>(
      policies{}, slot_policies{{"site", {.limit = 10}}, {"reports", {.limit = 1}}},
      std::vector<rule>{make_rule("site", "/", "site"),
                        make_rule("reports", "/reports/", "reports")});
  boost::asio::io_context io;
  auto strand = boost::asio::make_strand(io);
  completion holder;
  enter_async(lim_, *set, from("192.0.2.1", "/reports/1"), strand, holder);
  io.run();
  ASSERT_TRUE(holder.pass && holder.pass->admitted());
  ASSERT_EQ(holder.pass->slots().size(), 2u) << "site, then reports";
  EXPECT_EQ(holder.pass->slots()[0].key(), "@gate:site:ip=192.0.2.1");

  const auto released = lim_.slot_stats().released;
  completion second;
  enter_async(lim_, *set, from("192.0.2.1", "/reports/2"), strand, second);
  io.restart();
  io.run();
  ASSERT_TRUE(second.pass);
  EXPECT_FALSE(second.pass->admitted());
  EXPECT_TRUE(second.pass->slots().empty());
  EXPECT_EQ(lim_.slot_stats().released, released + 1) << "the site slot it had taken";
  // The site key is held by the first request alone again.
  auto probe = lim_.try_acquire("@gate:site:ip=192.0.2.1", {.limit = 10});
  ASSERT_TRUE(probe);
  EXPECT_EQ(probe.in_flight(), 2u);
}

TEST_F(HttpConcurrencyRulesTest, ARuleWithAMaxWaitIsServedByARelease) {
  const auto set = std::make_shared<const rule_set>(
      policies{}, slot_policies{{"reports", {.limit = 1, .lease_ttl = milliseconds{60'000}}}},
      std::vector<rule>{make_rule("reports", "/reports/", "reports", milliseconds{600'000})});
  boost::asio::io_context io;
  auto strand = boost::asio::make_strand(io);
  completion holder, waiter;
  enter_async(lim_, *set, from("192.0.2.1", "/reports/1"), strand, holder);
  io.run();
  ASSERT_TRUE(holder.pass && holder.pass->admitted());

  const auto refused = lim_.slot_stats().refused;
  enter_async(lim_, *set, from("192.0.2.1", "/reports/2"), strand, waiter);
  io.restart();
  io.poll();  // its first attempt, refused: it waits (the manual clock ends no lease)
  EXPECT_EQ(lim_.slot_stats().refused, refused + 1);
  EXPECT_FALSE(waiter.ran) << "a rule with a max_wait waits instead of refusing";

  // Released while the io_context is not running: the wake-up, not a timer, serves it.
  holder.pass->release();
  while (!waiter.ran) io.run_one();
  EXPECT_TRUE(waiter.on_strand);
  EXPECT_FALSE(waiter.ec);
  ASSERT_TRUE(waiter.pass->admitted());
  ASSERT_EQ(waiter.pass->slots().size(), 1u);
  EXPECT_EQ(waiter.pass->slots()[0].in_flight(), 1u);
}

TEST_F(HttpConcurrencyRulesTest, AWaitThatEndsIsARefusal) {
  const auto set = std::make_shared<const rule_set>(
      policies{}, slot_policies{{"reports", {.limit = 1, .lease_ttl = milliseconds{60'000}}}},
      std::vector<rule>{make_rule("reports", "/reports/", "reports", milliseconds{2})});
  auto holder = enter_concurrency(lim_, *set, from("192.0.2.1", "/reports/1"));
  ASSERT_TRUE(holder.admitted());
  boost::asio::io_context io;
  auto strand = boost::asio::make_strand(io);
  completion waiter;
  enter_async(lim_, *set, from("192.0.2.1", "/reports/2"), strand, waiter, 503);
  io.run();  // until the wait's deadline and its last attempt
  ASSERT_TRUE(waiter.ran);
  EXPECT_FALSE(waiter.ec);
  EXPECT_FALSE(waiter.pass->admitted());
  EXPECT_EQ(waiter.pass->response().status, 503u);
}

TEST_F(HttpConcurrencyRulesTest, TheBlockingFormWaitsToo) {
  const auto set = std::make_shared<const rule_set>(
      policies{}, slot_policies{{"reports", {.limit = 1, .lease_ttl = milliseconds{60'000}}}},
      std::vector<rule>{make_rule("reports", "/reports/", "reports", milliseconds{600'000})});
  auto holder = enter_concurrency(lim_, *set, from("192.0.2.1", "/reports/1"));
  ASSERT_TRUE(holder.admitted());
  const auto refused = lim_.slot_stats().refused;
  auto waiting = std::async(std::launch::async, [&] {
    return enter_concurrency(lim_, *set, from("192.0.2.1", "/reports/2"));
  });
  // Its first attempt refused, it waits (no lease ends on the manual clock): a release
  // through the limiter is what can serve it.
  while (lim_.slot_stats().refused == refused) std::this_thread::yield();
  holder.release();
  const auto pass = waiting.get();
  EXPECT_TRUE(pass.admitted());
  EXPECT_EQ(pass.slots().size(), 1u);
}

}  // namespace
}  // namespace sluice::http
