// The middleware's concurrency rules (sluice/http/concurrency_gate.hpp) on the memory
// backend with a manual clock: a pass holds its slots until it is destroyed, a refusal
// gives back what it took and answers with Retry-After and a problem body.
#include <gtest/gtest.h>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>
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
  auto waits_too_long = rule("a", "/", 1);
  waits_too_long.max_wait = max_gate_wait + milliseconds{1};
  EXPECT_THROW(concurrency_gate(lim_, {waits_too_long}), std::invalid_argument);
}

TEST_F(ConcurrencyGateTest, ARequestWithoutAKeyIsNotLimitedByThatRule) {
  const concurrency_gate gate(lim_, {rule("keyed", "/", 1, "header:X-API-Key")});
  auto a = gate.enter(from("192.0.2.1"));
  auto b = gate.enter(from("192.0.2.1"));
  EXPECT_TRUE(a.admitted());
  EXPECT_TRUE(b.admitted());
  EXPECT_TRUE(b.slots().empty());
}

TEST_F(ConcurrencyGateTest, AsyncEnterWaitsForARuleWithAMaxWaitAndCompletesOnTheStrand) {
  auto reports = rule("reports", "/reports", 1);
  reports.max_wait = max_gate_wait;
  const concurrency_gate gate(lim_, {rule("site", "/", 10), reports});
  boost::asio::io_context io;
  auto strand = boost::asio::make_strand(io);
  std::vector<gate_pass> passes;
  int on_strand = 0;
  auto enter = [&] {
    gate.async_enter(from("192.0.2.1"),
                     boost::asio::bind_executor(strand, [&](std::error_code ec, gate_pass p) {
                       EXPECT_FALSE(ec);
                       on_strand += strand.running_in_this_thread();
                       passes.push_back(std::move(p));
                     }));
  };
  enter();
  EXPECT_TRUE(passes.empty()) << "never inline";
  io.run();
  ASSERT_EQ(passes.size(), 1u);
  ASSERT_TRUE(passes[0].admitted());

  enter();  // holds a "site" slot while it waits for "reports"
  io.restart();
  io.poll();
  ASSERT_EQ(passes.size(), 1u) << "waiting";
  EXPECT_EQ(lim_.try_acquire("@gate:site:ip=192.0.2.1", {.limit = 10}).in_flight(), 3u);
  passes[0].release();
  while (passes.size() < 2) io.run_one();
  EXPECT_EQ(on_strand, 2);
  ASSERT_TRUE(passes[1].admitted());
  EXPECT_EQ(passes[1].slots().size(), 2u);
}

}  // namespace
}  // namespace sluice::http
