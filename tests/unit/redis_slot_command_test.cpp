// Slot steps on the wire without a socket (src/redis/slot_command.hpp): the command of one or
// several steps in one call of lua/slots.lua, their replies taken apart, and which waiting
// requests of a connection's queue share a call when decisions and slot steps wait together
// (src/redis/batch_selection.hpp).
#include <sluice/error.hpp>

#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "redis/batch_selection.hpp"
#include "redis/resp.hpp"
#include "redis/scripts.hpp"
#include "redis/slot_command.hpp"

namespace sluice::redis {
namespace {

using namespace std::chrono_literals;

reply_ptr parse_one(std::string_view bytes) {
  reply_reader r;
  EXPECT_TRUE(r.feed(bytes.data(), bytes.size()));
  reply_ptr out;
  EXPECT_EQ(r.next(out), reply_reader::status::reply);
  return out;
}

constexpr std::string_view id_a = "0123456789abcdef0123456789abcdef";
constexpr std::string_view id_b = "fedcba9876543210fedcba9876543210";

TEST(RedisSlotCommandTest, OneStepIsExactlyTheSingleStepCall) {
  const slot_request req{slot_operation::renew, id_a, 7, 1500ms};
  for (const auto how : {script_call::evalsha, script_call::eval}) {
    std::string single;
    slot_script("p:k", req).append(single, how);
    std::string batched;
    const slot_step_args step{"p:k", req.op, req.id, req.limit, req.lease_ttl};
    append_slot_command(batched, how, {&step, 1});
    EXPECT_EQ(batched, single);
  }
}

TEST(RedisSlotCommandTest, StepsGoInOrderKeysFirstThenFourArgumentsEach) {
  const std::vector<slot_step_args> steps{
      {"p:a", slot_operation::acquire, id_a, 3, 1000ms},
      {"p:b", slot_operation::release, id_b, 1, 0ms},
      {"p:a", slot_operation::renew, id_a, 1, 250ms},
  };
  std::string got;
  append_slot_command(got, script_call::evalsha, steps);
  std::string want;
  append_command(want, {"EVALSHA", detail::lua_slots.sha1, "3", "p:a", "p:b", "p:a", "0", id_a, "3",
                        "1000", "1", id_b, "1", "0", "2", id_a, "1", "250"});
  EXPECT_EQ(got, want);

  std::string eval;
  append_slot_command(eval, script_call::eval, steps);
  std::string want_eval;
  append_command(want_eval, {"EVAL", detail::lua_slots.source, "3", "p:a", "p:b", "p:a", "0", id_a,
                             "3", "1000", "1", id_b, "1", "0", "2", id_a, "1", "250"});
  EXPECT_EQ(eval, want_eval);
}

TEST(RedisSlotCommandTest, EachStepGetsItsOwnReplyOrItsOwnError) {
  // Step 1 acquired, step 2 a key of another type, step 3 refused (retry in 40 ms).
  const auto reply = parse_one(
      "*12\r\n:1\r\n:2\r\n:0\r\n:1000\r\n"
      "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n:0\r\n:0\r\n:0\r\n"
      ":0\r\n:3\r\n:40\r\n:0\r\n");
  std::vector<slot_result> out;
  ASSERT_FALSE(to_slot_replies(*reply, 3, out));
  ASSERT_EQ(out.size(), 3u);
  EXPECT_FALSE(out[0].ec);
  EXPECT_TRUE(out[0].reply.held);
  EXPECT_EQ(out[0].reply.in_flight, 2u);
  EXPECT_EQ(out[0].reply.expires_in, 1000ms);
  EXPECT_EQ(out[1].ec, make_error_code(errc::backend_script_error));
  EXPECT_FALSE(out[2].ec);
  EXPECT_FALSE(out[2].reply.held);
  EXPECT_EQ(out[2].reply.in_flight, 3u);
  EXPECT_EQ(out[2].reply.retry_after, 40ms);
}

TEST(RedisSlotCommandTest, AWholeCallsErrorOrAWrongShapeFailsEveryStep) {
  std::vector<slot_result> out;
  EXPECT_EQ(to_slot_replies(*parse_one("-ERR Error running script\r\n"), 2, out),
            make_error_code(errc::backend_script_error));
  EXPECT_EQ(to_slot_replies(*parse_one("-NOSCRIPT No matching script\r\n"), 2, out),
            make_error_code(errc::backend_script_error));
  // Four values for two steps: a protocol error, not the first step's answer.
  EXPECT_EQ(to_slot_replies(*parse_one("*4\r\n:1\r\n:1\r\n:0\r\n:10\r\n"), 2, out),
            make_error_code(errc::backend_protocol_error));
  // A step out of bounds (held 2, or a negative count) fails that step.
  ASSERT_FALSE(to_slot_replies(*parse_one("*4\r\n:2\r\n:1\r\n:0\r\n:10\r\n"), 1, out));
  EXPECT_EQ(out[0].ec, make_error_code(errc::backend_protocol_error));
  ASSERT_FALSE(to_slot_replies(*parse_one("*4\r\n:1\r\n:-1\r\n:0\r\n:10\r\n"), 1, out));
  EXPECT_EQ(out[0].ec, make_error_code(errc::backend_protocol_error));
}

TEST(RedisSlotCommandTest, AOneStepReplysErrorIsTheScriptsErrorAsBefore) {
  slot_reply r;
  // The step's own error (its key is no sorted set) fails it as the whole script failing did.
  EXPECT_EQ(to_slot_reply(*parse_one("*4\r\n-WRONGTYPE x\r\n:0\r\n:0\r\n:0\r\n"), r),
            make_error_code(errc::backend_script_error));
  EXPECT_EQ(to_slot_reply(*parse_one("-ERR Error running script\r\n"), r),
            make_error_code(errc::backend_script_error));
  ASSERT_FALSE(to_slot_reply(*parse_one("*4\r\n:1\r\n:1\r\n:0\r\n:30000\r\n"), r));
  EXPECT_TRUE(r.held);
  EXPECT_EQ(r.expires_in, 30000ms);
}

// A queue of decisions (d), slot steps (s) and opaque calls (c), as the batcher sees it.
struct item {
  std::string name;
  std::uint16_t slot = 0;
};
bool is_call(const item& i) { return i.name[0] == 'c'; }
int kind(const item& i) { return i.name[0] == 's' ? 1 : 0; }

std::vector<std::string> take(std::deque<item>& q, std::size_t max_batch, bool by_slot) {
  std::vector<std::string> names;
  for (auto& i : take_batch(
           q, max_batch, by_slot, is_call, [](const item& i) { return i.slot; }, kind)) {
    names.push_back(i.name);
  }
  return names;
}
std::vector<std::string> names_of(const std::deque<item>& q) {
  std::vector<std::string> names;
  for (const auto& i : q) names.push_back(i.name);
  return names;
}
using names = std::vector<std::string>;

TEST(RedisSlotBatchSelectionTest, SlotStepsLeaveTogetherInOrderAndNeverWithDecisions) {
  std::deque<item> q{{"s1"}, {"d1"}, {"s2"}, {"d2"}, {"s3"}, {"c1"}, {"s4"}};
  EXPECT_EQ(take(q, 32, false), (names{"s1", "s2", "s3"}));  // not past the opaque call
  EXPECT_EQ(names_of(q), (names{"d1", "d2", "c1", "s4"}));
  EXPECT_EQ(take(q, 32, false), (names{"d1", "d2"}));
  EXPECT_EQ(take(q, 32, false), (names{"c1"}));
  EXPECT_EQ(take(q, 32, false), (names{"s4"}));
  EXPECT_TRUE(q.empty());
}

TEST(RedisSlotBatchSelectionTest, AFullBatchLeavesTheRestWhereItWas) {
  std::deque<item> q{{"s1"}, {"d1"}, {"s2"}, {"s3"}, {"d2"}, {"s4"}};
  EXPECT_EQ(take(q, 2, false), (names{"s1", "s2"}));
  EXPECT_EQ(names_of(q), (names{"d1", "s3", "d2", "s4"}));
}

TEST(RedisSlotBatchSelectionTest, OnClusterOneCallHoldsOneHashSlotsSteps) {
  std::deque<item> q{{"s1", 5}, {"s2", 9}, {"d1", 5}, {"s3", 5}, {"s4", 9}};
  EXPECT_EQ(take(q, 32, true), (names{"s1", "s3"}));
  EXPECT_EQ(names_of(q), (names{"s2", "d1", "s4"}));
  EXPECT_EQ(take(q, 32, true), (names{"s2", "s4"}));
  EXPECT_EQ(take(q, 32, true), (names{"d1"}));
}

}  // namespace
}  // namespace sluice::redis
