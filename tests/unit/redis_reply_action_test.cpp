// What a script call's caller does with each reply, decided from replies built in memory
// (the RESP reader fed bytes, no socket).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "redis/reply_action.hpp"
#include "redis/resp.hpp"

namespace sluice::redis {
namespace {

using kind = reply_action::kind;
using cluster::node_address;

reply_ptr parse_one(std::string_view bytes) {
  reply_reader r;
  EXPECT_TRUE(r.feed(bytes.data(), bytes.size()));
  reply_ptr out;
  EXPECT_EQ(r.next(out), reply_reader::status::reply);
  return out;
}

// The action for an error reply with `text`.
reply_action for_error(std::string_view text) {
  return classify_reply(*parse_one("-" + std::string(text) + "\r\n"));
}

TEST(RedisReplyActionTest, ResultsAreDone) {
  // What the scripts answer, and anything else that is not an error: the decoders judge it.
  EXPECT_EQ(classify_reply(*parse_one("*4\r\n:1\r\n:9\r\n:0\r\n:100\r\n")).what, kind::done);
  EXPECT_EQ(classify_reply(*parse_one(":1\r\n")).what, kind::done);
  EXPECT_EQ(classify_reply(*parse_one("$-1\r\n")).what, kind::done);  // nil
  EXPECT_EQ(classify_reply(*parse_one("*0\r\n")).what, kind::done);
  EXPECT_EQ(classify_reply(*parse_one("$5\r\nhello\r\n")).what, kind::done);
}

TEST(RedisReplyActionTest, StatusRepliesAreNotErrors) {
  // The same words as a status (or a bulk string) are data, not an error.
  EXPECT_EQ(classify_reply(*parse_one("+NOSCRIPT No matching script\r\n")).what, kind::done);
  EXPECT_EQ(classify_reply(*parse_one("+MOVED 1 127.0.0.1:7000\r\n")).what, kind::done);
  EXPECT_EQ(classify_reply(*parse_one("$8\r\nREADONLY\r\n")).what, kind::done);
}

TEST(RedisReplyActionTest, ErrorsInsideAnArrayAreDone) {
  // Only the reply as a whole is classified; items are the decoder's business.
  EXPECT_EQ(classify_reply(*parse_one("*1\r\n-NOSCRIPT No matching script\r\n")).what, kind::done);
  EXPECT_EQ(classify_reply(*parse_one("*1\r\n-MOVED 1 127.0.0.1:7000\r\n")).what, kind::done);
}

TEST(RedisReplyActionTest, NoscriptResendsAsEval) {
  EXPECT_EQ(for_error("NOSCRIPT No matching script. Please use EVAL.").what, kind::resend_as_eval);
  EXPECT_EQ(for_error("NOSCRIPT").what, kind::resend_as_eval);
}

TEST(RedisReplyActionTest, RedirectsCarryWhereToGo) {
  struct redirect_case {
    std::string_view text;
    kind what;
    cluster::redirect::kind type;
    std::uint16_t slot;
    node_address target;
  };
  for (const auto& c : {
           redirect_case{"MOVED 3999 127.0.0.1:6381",
                         kind::moved,
                         cluster::redirect::kind::moved,
                         3999,
                         {"127.0.0.1", 6381}},
           // An unknown endpoint: the host stays empty for the caller to fill in.
           redirect_case{
               "MOVED 1 :7001", kind::moved, cluster::redirect::kind::moved, 1, {"", 7001}},
           redirect_case{"ASK 16383 [::1]:7002",
                         kind::ask,
                         cluster::redirect::kind::ask,
                         16383,
                         {"::1", 7002}},
       }) {
    const auto a = for_error(c.text);
    EXPECT_EQ(a.what, c.what) << c.text;
    EXPECT_EQ(a.redirect.type, c.type) << c.text;
    EXPECT_EQ(a.redirect.slot, c.slot) << c.text;
    EXPECT_EQ(a.redirect.target, c.target) << c.text;
  }
}

TEST(RedisReplyActionTest, MalformedRedirectsFail) {
  for (const char* text : {"MOVED", "MOVED 3999", "MOVED 16384 127.0.0.1:7000",
                           "MOVED x 127.0.0.1:7000", "MOVED 1 127.0.0.1", "ASK 1 127.0.0.1:0",
                           "ASK -1 127.0.0.1:7000", "moved 1 127.0.0.1:7000"}) {
    const auto a = for_error(text);
    EXPECT_EQ(a.what, kind::failed) << text;
    EXPECT_EQ(a.redirect.target, node_address{}) << text;
  }
}

TEST(RedisReplyActionTest, ACodeLaterInTheTextIsNotThatCode) {
  EXPECT_EQ(for_error("ERR Error running script: MOVED 1 127.0.0.1:7000").what, kind::failed);
  EXPECT_EQ(for_error("ERR user_script:1: NOSCRIPT").what, kind::failed);
  EXPECT_EQ(for_error("WRONGTYPE Operation against a key holding READONLY").what, kind::failed);
  EXPECT_EQ(for_error("ERR TRYAGAIN").what, kind::failed);
}

TEST(RedisReplyActionTest, TransientErrorsRetryLater) {
  EXPECT_EQ(for_error("CLUSTERDOWN The cluster is down").what, kind::retry_later);
  EXPECT_EQ(for_error("TRYAGAIN Multiple keys request during rehashing of slot").what,
            kind::retry_later);
  EXPECT_EQ(for_error("LOADING Redis is loading the dataset in memory").what, kind::retry_later);
  EXPECT_EQ(for_error("MASTERDOWN Link with MASTER is down").what, kind::retry_later);
}

TEST(RedisReplyActionTest, ReadonlyRediscoversTheMaster) {
  EXPECT_EQ(for_error("READONLY You can't write against a read only replica.").what,
            kind::rediscover_master);
}

TEST(RedisReplyActionTest, OtherErrorsFail) {
  EXPECT_EQ(for_error("ERR Error running script (call to f_0123): oops").what, kind::failed);
  EXPECT_EQ(for_error("WRONGTYPE Operation against a key holding the wrong kind of value").what,
            kind::failed);
  EXPECT_EQ(for_error("OOM command not allowed when used memory > 'maxmemory'.").what,
            kind::failed);
  EXPECT_EQ(for_error("").what, kind::failed);
}

}  // namespace
}  // namespace sluice::redis
