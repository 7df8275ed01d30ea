// The Redis client's sans-I/O parts: command formatting, the incremental reply reader, the
// token-bucket reply, and the reconnect backoff.
#include <sluice/error.hpp>

#include <gtest/gtest.h>

#include "redis/connection.hpp"
#include "redis/resp.hpp"
#include "redis/scripts.hpp"
#include "redis/decide_command.hpp"

namespace {

using namespace sluice;
using namespace std::chrono_literals;

redis::reply_ptr parse_one(std::string_view bytes) {
  redis::reply_reader r;
  EXPECT_TRUE(r.feed(bytes.data(), bytes.size()));
  redis::reply_ptr out;
  EXPECT_EQ(r.next(out), redis::reply_reader::status::reply);
  return out;
}

TEST(RedisProtocolTest, FormatsBinarySafeCommands) {
  std::string out;
  redis::append_command(out, {"SET", std::string_view("k\0y", 3), ""});
  EXPECT_EQ(out, std::string("*3\r\n$3\r\nSET\r\n$3\r\nk\0y\r\n$0\r\n\r\n", 28));
  redis::append_command(out, {"PING"});
  EXPECT_TRUE(out.ends_with("*1\r\n$4\r\nPING\r\n"));
}

TEST(RedisProtocolTest, FormatsManyArguments) {
  std::vector<std::string> args(40, "x");
  std::vector<std::string_view> views(args.begin(), args.end());
  std::string out;
  redis::append_command(out, views.data(), views.size());
  EXPECT_TRUE(out.starts_with("*40\r\n$1\r\nx\r\n"));
}

TEST(RedisProtocolTest, ReaderAssemblesRepliesFromFragments) {
  const std::string stream = "+OK\r\n*2\r\n:1\r\n$3\r\nabc\r\n-ERR no\r\n";
  redis::reply_reader r;
  std::vector<redis::reply_ptr> got;
  for (char c : stream) {  // one byte at a time: replies may be split anywhere
    ASSERT_TRUE(r.feed(&c, 1));
    redis::reply_ptr rep;
    while (r.next(rep) == redis::reply_reader::status::reply) got.push_back(std::move(rep));
  }
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0]->type, REDIS_REPLY_STATUS);
  EXPECT_EQ(redis::reply_text(*got[0]), "OK");
  ASSERT_EQ(got[1]->type, REDIS_REPLY_ARRAY);
  EXPECT_EQ(got[1]->element[0]->integer, 1);
  EXPECT_EQ(redis::reply_text(*got[1]->element[1]), "abc");
  EXPECT_TRUE(redis::is_error(*got[2], "ERR"));
  EXPECT_FALSE(redis::is_error(*got[2], "NOSCRIPT"));
}

TEST(RedisProtocolTest, ReaderReportsProtocolErrors) {
  redis::reply_reader r;
  const std::string junk = "?what\r\n";
  ASSERT_TRUE(r.feed(junk.data(), junk.size()));
  redis::reply_ptr rep;
  EXPECT_EQ(r.next(rep), redis::reply_reader::status::protocol_error);
  EXPECT_FALSE(r.error_text().empty());
}

TEST(RedisProtocolTest, DecideCommandFollowsTheScriptsArgv) {
  const detail::limit_params p{algorithm::gcra, 100'000, 1'000'000, 200'000};
  std::string sha_cmd;
  redis::append_decide_command(sha_cmd, redis::script_call::evalsha, "sluice:k", p);
  std::string expected;
  redis::append_command(expected, {"EVALSHA", detail::lua_decide.sha1, "1", "sluice:k", "1",
                                   "100000", "1000000", "200000"});
  EXPECT_EQ(sha_cmd, expected);
  EXPECT_EQ(detail::lua_decide.sha1.size(), 40u);

  std::string eval_cmd;
  redis::append_decide_command(eval_cmd, redis::script_call::eval, "k", p, 1234);
  expected.clear();
  redis::append_command(expected, {"EVAL", detail::lua_decide.source, "1", "k", "1", "100000",
                                   "1000000", "200000", "1234"});
  EXPECT_EQ(eval_cmd, expected);
}

TEST(RedisProtocolTest, ParsesAllowedAndDeniedReplies) {
  decision d;
  EXPECT_FALSE(redis::to_decision(*parse_one("*4\r\n:1\r\n:7\r\n:0\r\n:300\r\n"), 10, d));
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.limit, 10u);
  EXPECT_EQ(d.remaining, 7u);
  EXPECT_EQ(d.retry_after, 0ms);
  EXPECT_EQ(d.reset_after, 300ms);
  EXPECT_FALSE(d.degraded);

  EXPECT_FALSE(redis::to_decision(*parse_one("*4\r\n:0\r\n:0\r\n:42\r\n:1000\r\n"), 10, d));
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.remaining, 0u);
  EXPECT_EQ(d.retry_after, 42ms);
  EXPECT_EQ(d.reset_after, 1000ms);
}

TEST(RedisProtocolTest, ClassifiesBadReplies) {
  detail::limit_outcome o;
  EXPECT_EQ(redis::parse_decide_reply(
                *parse_one("-NOSCRIPT No matching script. Please use EVAL.\r\n"), o),
            redis::script_reply::noscript);
  EXPECT_EQ(redis::parse_decide_reply(*parse_one("-ERR boom\r\n"), o),
            redis::script_reply::failed);
  for (std::string_view bad :
       {"+OK\r\n", "*3\r\n:1\r\n:1\r\n:1\r\n", "*4\r\n:2\r\n:1\r\n:0\r\n:1\r\n",
        "*4\r\n:1\r\n:-1\r\n:0\r\n:1\r\n", "*4\r\n:1\r\n$1\r\n1\r\n:0\r\n:1\r\n",
        "*4\r\n:1\r\n:1\r\n:5\r\n:1\r\n",  // allowed with a retry time
        "*4\r\n:1\r\n:99999999999999\r\n:0\r\n:1\r\n"}) {
    EXPECT_EQ(redis::parse_decide_reply(*parse_one(bad), o), redis::script_reply::malformed)
        << bad;
  }
  decision d;
  EXPECT_EQ(redis::to_decision(*parse_one("-ERR x\r\n"), 1, d), errc::backend_script_error);
  EXPECT_EQ(redis::to_decision(*parse_one(":1\r\n"), 1, d), errc::backend_protocol_error);
}

TEST(RedisProtocolTest, BackoffDoublesUpToTheMaximum) {
  EXPECT_EQ(redis::backoff_delay(0, 25ms, 1000ms), 0ms);
  EXPECT_EQ(redis::backoff_delay(1, 25ms, 1000ms), 25ms);
  EXPECT_EQ(redis::backoff_delay(2, 25ms, 1000ms), 50ms);
  EXPECT_EQ(redis::backoff_delay(3, 25ms, 1000ms), 100ms);
  EXPECT_EQ(redis::backoff_delay(6, 25ms, 1000ms), 800ms);
  EXPECT_EQ(redis::backoff_delay(7, 25ms, 1000ms), 1000ms);
  EXPECT_EQ(redis::backoff_delay(1000, 25ms, 1000ms), 1000ms);
}

}  // namespace

namespace {

using namespace sluice;

TEST(RedisProtocolTest, FormatsTheMultiKeyCommandKeysThenArgvPerKey) {
  const std::vector<redis::multi_key> keys{
      {"sluice:a", {algorithm::token_bucket, 10'000'000, 1000, 1'000'000}},
      {"sluice:b", {algorithm::fixed_window, 20, 60'000, 2}}};
  std::string out;
  redis::append_decide_multi_command(out, redis::script_call::evalsha, keys);
  std::string want;
  redis::append_command(
      want, {"EVALSHA", detail::lua_decide_multi.sha1, "2", "sluice:a", "sluice:b", "0",
             "10000000", "1000", "1000000", "4", "20", "60000", "2"});
  EXPECT_EQ(out, want);
  out.clear();
  redis::append_decide_multi_command(out, redis::script_call::eval, keys, 123);
  EXPECT_NE(out.find(detail::lua_decide_multi.source), std::string::npos);
  EXPECT_TRUE(out.ends_with("$3\r\n123\r\n"));
  out.clear();
  redis::append_refund_command(out, redis::script_call::evalsha, keys);
  EXPECT_NE(out.find(detail::lua_refund.sha1), std::string::npos);
  EXPECT_NE(detail::lua_decide_multi.sha1, detail::lua_decide.sha1);
}

TEST(RedisProtocolTest, ReadsTheMultiKeyReply) {
  const auto ok =
      parse_one("*2\r\n*4\r\n:1\r\n:7\r\n:0\r\n:300\r\n*4\r\n:0\r\n:0\r\n:500\r\n:2000\r\n");
  std::vector<decision> ds;
  const std::uint64_t caps[] = {10, 2};
  ASSERT_FALSE(redis::to_decisions(*ok, caps, ds));
  ASSERT_EQ(ds.size(), 2u);
  EXPECT_TRUE(ds[0].allowed);
  EXPECT_EQ(ds[0].remaining, 7u);
  EXPECT_EQ(ds[0].limit, 10u);
  EXPECT_FALSE(ds[1].allowed);
  EXPECT_EQ(ds[1].retry_after, 500ms);
  EXPECT_EQ(ds[1].reset_after, 2000ms);
  // One reply per key or it is nonsense; NOSCRIPT and script errors are errors.
  const std::uint64_t three[] = {1, 1, 1};
  EXPECT_EQ(redis::to_decisions(*ok, three, ds), errc::backend_protocol_error);
  const auto nested_error = parse_one("*1\r\n-ERR x\r\n");
  EXPECT_EQ(redis::to_decisions(*nested_error, std::span(caps, 1), ds),
            errc::backend_protocol_error);
  const auto noscript = parse_one("-NOSCRIPT No matching script.\r\n");
  std::vector<detail::limit_outcome> os;
  EXPECT_EQ(redis::parse_decide_multi_reply(*noscript, 2, os), redis::script_reply::noscript);
  EXPECT_EQ(redis::to_decisions(*noscript, caps, ds), errc::backend_script_error);
}

}  // namespace
