// The Sentinel address source's logic without sockets or clocks (sentinel_fsm.hpp:
// sentinel_address): what the master's connection gets when it asks for an address, when it
// is told of a move, and how often the sentinels are asked. The questions are recorded, the
// answers canned, and time moves only when a test moves it.
#include <sluice/error.hpp>

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "redis/address_source.hpp"
#include "redis/resp.hpp"
#include "redis/sentinel/sentinel_fsm.hpp"

namespace sluice::redis::sentinel {
namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

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

// A sentinel_address on `n` sentinels whose questions and moves are recorded.
struct fixture {
  explicit fixture(std::size_t n = 2)
      : a(n, "mymaster", 100ms, [this](std::size_t i) { asked.push_back(i); }) {
    a.on_moved([this](const server_address& to) { moved.push_back(to); });
  }
  // A resolve whose answer lands in `answers`.
  void resolve(clock_type::time_point now) {
    a.resolve(now, [this](std::optional<server_address> to) { answers.push_back(to); });
  }

  std::vector<std::size_t> asked;
  std::vector<server_address> moved;
  std::vector<std::optional<server_address>> answers;
  sentinel_address a;
};

const server_address first{"10.0.0.5", 6380};
const server_address second{"10.0.0.6", 6381};

TEST(SentinelAddressTest, TheFirstAttemptWaitsForTheSentinelsAnswer) {
  fixture f;
  f.resolve(t0);
  ASSERT_EQ(f.asked, (std::vector<std::size_t>{0}));
  EXPECT_TRUE(f.answers.empty());  // waits for the round
  f.a.on_answer(0, {}, address("10.0.0.5", "6380").get());
  ASSERT_EQ(f.answers.size(), 1u);
  EXPECT_EQ(f.answers[0], first);
  EXPECT_TRUE(f.moved.empty());  // the first master is no move
  EXPECT_EQ(f.a.moves(), 0u);
}

TEST(SentinelAddressTest, NoSentinelKnowsTheMasterSoTheAttemptGetsNoAddress) {
  fixture f;
  f.resolve(t0);
  f.a.on_answer(0, make_error_code(errc::backend_unavailable), nullptr);
  ASSERT_EQ(f.asked, (std::vector<std::size_t>{0, 1}));  // the next sentinel
  EXPECT_TRUE(f.answers.empty());
  f.a.on_answer(1, {}, parse("*-1\r\n").get());
  ASSERT_EQ(f.answers.size(), 1u);
  EXPECT_FALSE(f.answers[0].has_value());
}

TEST(SentinelAddressTest, AReconnectWithin100MsGetsTheServedMasterAtOnce) {
  fixture f;
  f.resolve(t0);
  f.a.on_answer(0, {}, address("10.0.0.5", "6380").get());
  f.resolve(t0 + 50ms);
  EXPECT_EQ(f.asked.size(), 1u);  // not asked again
  ASSERT_EQ(f.answers.size(), 2u);
  EXPECT_EQ(f.answers[1], first);
  // Later, a reconnect asks again and waits for the answer.
  f.resolve(t0 + 150ms);
  EXPECT_EQ(f.asked.size(), 2u);
  EXPECT_EQ(f.answers.size(), 2u);
  f.a.on_answer(0, {}, address("10.0.0.6", "6381").get());
  ASSERT_EQ(f.answers.size(), 3u);
  EXPECT_EQ(f.answers[2], second);
  EXPECT_EQ(f.a.moves(), 1u);
}

TEST(SentinelAddressTest, AttemptsDuringARoundAllGetItsAnswer) {
  fixture f;
  f.resolve(t0);
  f.resolve(t0 + 1ms);  // a round is running: no second question
  EXPECT_EQ(f.asked.size(), 1u);
  f.a.on_answer(0, {}, address("10.0.0.5", "6380").get());
  ASSERT_EQ(f.answers.size(), 2u);
  EXPECT_EQ(f.answers[0], first);
  EXPECT_EQ(f.answers[1], first);
}

TEST(SentinelAddressTest, APollThatFindsAnotherMasterMovesTheConnectionOnce) {
  fixture f;
  f.resolve(t0);
  f.a.on_answer(0, {}, address("10.0.0.5", "6380").get());
  f.a.poll(t0 + 1s);
  ASSERT_EQ(f.asked.size(), 2u);
  f.a.on_answer(0, {}, address("10.0.0.5", "6380").get());
  EXPECT_TRUE(f.moved.empty());  // the same master: nothing
  f.a.poll(t0 + 2s);
  f.a.on_answer(0, {}, address("10.0.0.6", "6381").get());
  EXPECT_EQ(f.moved, (std::vector<server_address>{second}));
  EXPECT_EQ(f.a.moves(), 1u);
  EXPECT_EQ(f.a.served(), second);
}

TEST(SentinelAddressTest, FailedCallsAskAtMostEvery100Ms) {
  fixture f;
  f.resolve(t0);
  f.a.on_answer(0, {}, address("10.0.0.5", "6380").get());
  f.a.suspect(t0 + 10ms);
  f.a.suspect(t0 + 99ms);
  EXPECT_EQ(f.asked.size(), 1u);
  f.a.suspect(t0 + 100ms);
  EXPECT_EQ(f.asked.size(), 2u);
  f.a.suspect(t0 + 300ms);  // a round is running
  EXPECT_EQ(f.asked.size(), 2u);
  // A demoted master: the sentinels name the new one, and the connection is moved there.
  f.a.on_answer(0, {}, address("10.0.0.6", "6381").get());
  EXPECT_EQ(f.moved, (std::vector<server_address>{second}));
}

TEST(SentinelAddressTest, WhileTheConnectionIsDownItAsksEvery100Ms) {
  fixture f;
  f.resolve(t0);
  f.a.on_answer(0, {}, address("10.0.0.5", "6380").get());
  f.a.link_down(t0 + 1s);  // the master was killed
  ASSERT_EQ(f.asked.size(), 2u);
  f.a.on_answer(0, {}, address("10.0.0.5", "6380").get());  // not failed over yet
  f.a.down_tick(t0 + 1s + 50ms);
  EXPECT_EQ(f.asked.size(), 2u);  // at most every 100 ms
  f.a.down_tick(t0 + 1s + 100ms);
  ASSERT_EQ(f.asked.size(), 3u);
  f.a.on_answer(0, {}, address("10.0.0.6", "6381").get());  // promoted
  EXPECT_EQ(f.moved, (std::vector<server_address>{second}));
  f.a.link_up();
  EXPECT_FALSE(f.a.down());
  f.a.down_tick(t0 + 2s);  // up: the timer's last tick asks nothing
  EXPECT_EQ(f.asked.size(), 3u);
}

TEST(SentinelAddressTest, AnAnswerThatNamesNoMasterKeepsTheServedOne) {
  fixture f;
  f.resolve(t0);
  f.a.on_answer(0, {}, address("10.0.0.5", "6380").get());
  f.resolve(t0 + 1s);
  f.a.on_answer(0, make_error_code(errc::backend_timeout), nullptr);
  f.a.on_answer(1, make_error_code(errc::backend_timeout), nullptr);
  ASSERT_EQ(f.answers.size(), 2u);
  EXPECT_EQ(f.answers[1], first);  // the old master is tried again
  EXPECT_TRUE(f.moved.empty());
}

TEST(SentinelAddressTest, AStaleAnswerIsIgnored) {
  fixture f;
  f.resolve(t0);
  f.a.on_answer(1, {}, address("10.0.0.6", "6381").get());  // not this round's question
  EXPECT_TRUE(f.answers.empty());
  f.a.on_answer(0, {}, address("10.0.0.5", "6380").get());
  ASSERT_EQ(f.answers.size(), 1u);
  EXPECT_EQ(f.answers[0], first);
}

TEST(SentinelAddressTest, StopAnswersTheWaitingAttemptWithNoAddressAndAsksNoMore) {
  fixture f;
  f.resolve(t0);
  f.a.stop();
  ASSERT_EQ(f.answers.size(), 1u);
  EXPECT_FALSE(f.answers[0].has_value());
  f.a.on_answer(0, {}, address("10.0.0.5", "6380").get());
  f.a.poll(t0 + 1s);
  f.resolve(t0 + 2s);
  EXPECT_EQ(f.asked.size(), 1u);
  EXPECT_EQ(f.answers.size(), 2u);
  EXPECT_FALSE(f.answers[1].has_value());
  EXPECT_TRUE(f.moved.empty());
}

TEST(SentinelAddressTest, AnInlineRefusalMovesOnToTheNextSentinel) {
  // A sentinel whose connection is down refuses at once: its answer comes back inside ask.
  std::vector<std::size_t> asked;
  sentinel_address* self = nullptr;
  sentinel_address a(3, "mymaster", 100ms, [&](std::size_t i) {
    asked.push_back(i);
    if (i < 2) self->on_answer(i, make_error_code(errc::backend_unavailable), nullptr);
  });
  self = &a;
  std::vector<std::optional<server_address>> answers;
  a.resolve(t0, [&](std::optional<server_address> to) { answers.push_back(to); });
  EXPECT_EQ(asked, (std::vector<std::size_t>{0, 1, 2}));
  EXPECT_TRUE(answers.empty());
  a.on_answer(2, {}, address("10.0.0.5", "6380").get());
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_EQ(answers[0], first);
}

TEST(FixedAddressTest, AnswersAtOnceAndNeverMoves) {
  auto s = fixed_address(first);
  s->start([](const server_address&) { ADD_FAILURE() << "a fixed address moved"; });
  std::optional<server_address> got;
  s->resolve([&](std::optional<server_address> a) { got = a; });
  EXPECT_EQ(got, first);  // inline
  s->suspect();
  EXPECT_EQ(s->moves(), 0u);
  // connection::retarget points it elsewhere: later attempts go there.
  s->pointed_at(second);
  s->resolve([&](std::optional<server_address> a) { got = a; });
  EXPECT_EQ(got, second);
}

}  // namespace
}  // namespace sluice::redis::sentinel
