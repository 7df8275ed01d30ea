// Sentinel resolution without sockets or clocks (src/redis/sentinel/sentinel_fsm.hpp):
// canned answers in, what to do out; time moves only when a test moves it.
#include <sluice/error.hpp>

#include <chrono>
#include <string>
#include <string_view>

#include <gtest/gtest.h>

#include "redis/resp.hpp"
#include "redis/sentinel/sentinel_fsm.hpp"

namespace sluice::redis::sentinel {
namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;
using kind = resolver::step::kind;

const clock_type::time_point t0 = clock_type::time_point{} + 1h;

reply_ptr parse(std::string_view bytes) {
  reply_reader r;
  EXPECT_TRUE(r.feed(bytes.data(), bytes.size()));
  reply_ptr out;
  EXPECT_EQ(r.next(out), reply_reader::status::reply);
  return out;
}

reply_ptr address(std::string_view host, std::string_view port) {
  return parse("*2\r\n$" + std::to_string(host.size()) + "\r\n" + std::string(host) + "\r\n$" +
               std::to_string(port.size()) + "\r\n" + std::string(port) + "\r\n");
}

const auto unknown = [] { return parse("*-1\r\n"); };  // the sentinel does not know it

TEST(SentinelFsmTest, ParsesTheMastersAddress) {
  EXPECT_EQ(parse_master_address(*address("10.0.0.5", "6380")), (master_address{"10.0.0.5", 6380}));
  EXPECT_FALSE(parse_master_address(*unknown()));
  EXPECT_FALSE(parse_master_address(*address("10.0.0.5", "0")));
  EXPECT_FALSE(parse_master_address(*address("10.0.0.5", "65536")));
  EXPECT_FALSE(parse_master_address(*address("10.0.0.5", "63x")));
  EXPECT_FALSE(parse_master_address(*address("", "6380")));
  EXPECT_FALSE(parse_master_address(*parse("-ERR unknown command\r\n")));
}

TEST(SentinelFsmTest, TheFirstAnswerWins) {
  resolver r(3, 100ms);
  auto s = r.poll(t0);
  ASSERT_EQ(s.what, kind::ask);
  EXPECT_EQ(s.sentinel, 0u);
  s = r.on_answer(0, {}, address("10.0.0.5", "6380").get());
  ASSERT_EQ(s.what, kind::use);
  EXPECT_EQ(s.master, (master_address{"10.0.0.5", 6380}));
  EXPECT_FALSE(r.asking());
}

TEST(SentinelFsmTest, SentinelsThatDoNotKnowOrDoNotAnswerArePassedOver) {
  resolver r(3, 100ms);
  ASSERT_EQ(r.poll(t0).what, kind::ask);
  auto s = r.on_answer(0, make_error_code(errc::backend_unavailable), nullptr);
  ASSERT_EQ(s.what, kind::ask);
  EXPECT_EQ(s.sentinel, 1u);
  s = r.on_answer(1, {}, unknown().get());
  ASSERT_EQ(s.what, kind::ask);
  EXPECT_EQ(s.sentinel, 2u);
  s = r.on_answer(2, {}, address("10.0.0.6", "6379").get());
  ASSERT_EQ(s.what, kind::use);
  EXPECT_EQ(s.master, (master_address{"10.0.0.6", 6379}));
}

TEST(SentinelFsmTest, NoSentinelKnowingWarnsOnceUntilOneKnows) {
  resolver r(2, 100ms);
  auto now = t0;
  for (int round = 0; round < 3; ++round) {
    ASSERT_EQ(r.poll(now).what, kind::ask);
    ASSERT_EQ(r.on_answer(0, {}, unknown().get()).what, kind::ask);
    const auto s = r.on_answer(1, make_error_code(errc::backend_timeout), nullptr);
    ASSERT_EQ(s.what, kind::no_master);
    EXPECT_EQ(s.warn, round == 0) << round;
    now += 1s;
  }
  ASSERT_EQ(r.poll(now).what, kind::ask);
  ASSERT_EQ(r.on_answer(0, {}, address("10.0.0.5", "6380").get()).what, kind::use);
  r.serving({"10.0.0.5", 6380});
  // A new outage warns again.
  ASSERT_EQ(r.poll(now + 1s).what, kind::ask);
  ASSERT_EQ(r.on_answer(0, {}, unknown().get()).what, kind::ask);
  EXPECT_TRUE(r.on_answer(1, {}, unknown().get()).warn);
}

TEST(SentinelFsmTest, TheSameMasterAgainIsNothingAndANewOneIsAFailover) {
  resolver r(1, 100ms);
  ASSERT_EQ(r.poll(t0).what, kind::ask);
  ASSERT_EQ(r.on_answer(0, {}, address("10.0.0.5", "6380").get()).what, kind::use);
  r.serving({"10.0.0.5", 6380});
  ASSERT_EQ(r.poll(t0 + 1s).what, kind::ask);
  EXPECT_EQ(r.on_answer(0, {}, address("10.0.0.5", "6380").get()).what, kind::nothing);
  ASSERT_EQ(r.poll(t0 + 2s).what, kind::ask);
  const auto s = r.on_answer(0, {}, address("10.0.0.7", "6380").get());
  ASSERT_EQ(s.what, kind::use);
  EXPECT_EQ(s.master, (master_address{"10.0.0.7", 6380}));
}

TEST(SentinelFsmTest, AMasterThatCouldNotBeUsedIsOfferedAgain) {
  resolver r(1, 100ms);
  ASSERT_EQ(r.poll(t0).what, kind::ask);
  ASSERT_EQ(r.on_answer(0, {}, address("10.0.0.5", "6380").get()).what, kind::use);
  // Not served (the backend could not be built): the next answer offers it again.
  ASSERT_EQ(r.poll(t0 + 1s).what, kind::ask);
  EXPECT_EQ(r.on_answer(0, {}, address("10.0.0.5", "6380").get()).what, kind::use);
}

TEST(SentinelFsmTest, RequestsAreRateLimitedAndNeverOverlapARound) {
  resolver r(2, 100ms);
  ASSERT_EQ(r.request(t0).what, kind::ask);
  EXPECT_EQ(r.request(t0 + 1ms).what, kind::nothing);  // a round is running
  EXPECT_EQ(r.poll(t0 + 2ms).what, kind::nothing);
  ASSERT_EQ(r.on_answer(0, {}, address("10.0.0.5", "6380").get()).what, kind::use);
  EXPECT_EQ(r.request(t0 + 99ms).what, kind::nothing);  // too soon after the last round
  EXPECT_EQ(r.request(t0 + 100ms).what, kind::ask);
}

TEST(SentinelFsmTest, AnAnswerFromAnotherRoundOrSentinelIsIgnored) {
  resolver r(2, 100ms);
  EXPECT_EQ(r.on_answer(0, {}, address("10.0.0.5", "6380").get()).what, kind::nothing);
  ASSERT_EQ(r.poll(t0).what, kind::ask);
  EXPECT_EQ(r.on_answer(1, {}, address("10.0.0.5", "6380").get()).what, kind::nothing);
  EXPECT_TRUE(r.asking());
}

}  // namespace
}  // namespace sluice::redis::sentinel
