// The connection's protocol state (src/redis/request_pipeline.hpp) driven without a socket or
// a timer: requests, writes, replies and the time are fed in by hand, as the connection would.
#include <sluice/error.hpp>

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include "redis/request_pipeline.hpp"
#include "redis/resp.hpp"

namespace {

using namespace std::chrono_literals;
using sluice::errc;
using sluice::redis::link_state;
using sluice::redis::reply_ptr;
using sluice::redis::request_pipeline;
using kind = request_pipeline::reply_kind;
using stuck = request_pipeline::stuck;
using tp = request_pipeline::clock::time_point;

constexpr auto timeout = 100ms;
const tp t0{std::chrono::seconds{1000}};

// A reply as the reader would produce it from `wire` (one whole RESP reply).
reply_ptr parse(const std::string& wire) {
  sluice::redis::reply_reader r;
  EXPECT_TRUE(r.feed(wire.data(), wire.size()));
  reply_ptr out;
  EXPECT_EQ(r.next(out), sluice::redis::reply_reader::status::reply);
  return out;
}
reply_ptr integer(long long v) { return parse(":" + std::to_string(v) + "\r\n"); }

// What each request's handler received, by the request's number.
struct outcomes {
  struct one {
    std::error_code ec;
    std::optional<long long> value;
  };
  std::vector<std::optional<one>> got;
  request_pipeline::request make(int id, tp deadline, std::size_t replies = 1) {
    if (got.size() <= static_cast<std::size_t>(id)) got.resize(id + 1);
    return {"CMD" + std::to_string(id) + ";", deadline,
            [this, id](std::error_code ec, reply_ptr r) {
              EXPECT_FALSE(got[id]) << "request " << id << " completed twice";
              got[id] =
                  one{ec, r && r->type == REDIS_REPLY_INTEGER ? std::optional<long long>(r->integer)
                                                              : std::nullopt};
            },
            replies};
  }
};

struct fixture {
  std::atomic<std::size_t> pending{0};
  request_pipeline p{timeout, pending};
  outcomes o;
  // Accepted as the connection does: counted first.
  bool submit(int id, tp deadline, tp now, link_state s = link_state::up, std::size_t replies = 1) {
    ++pending;
    auto r = o.make(id, deadline, replies);
    return p.accept(r, s, now);
  }
  std::string write(tp now) {
    std::string out;
    p.take_unsent(out, now);
    return out;
  }
};

TEST(RedisRequestPipelineTest, RepliesAnswerRequestsInTheOrderTheyWereWritten) {
  fixture f;
  ASSERT_TRUE(f.submit(0, t0 + timeout, t0));
  ASSERT_TRUE(f.submit(1, t0 + timeout, t0));
  EXPECT_EQ(f.write(t0), "CMD0;CMD1;");  // one write for both: the pipelining
  EXPECT_FALSE(f.p.has_unsent());
  EXPECT_EQ(f.p.on_reply(integer(10)), kind::answered);
  EXPECT_EQ(f.p.on_reply(integer(11)), kind::answered);
  ASSERT_TRUE(f.o.got[0] && f.o.got[1]);
  EXPECT_EQ(f.o.got[0]->value, 10);
  EXPECT_EQ(f.o.got[1]->value, 11);
  EXPECT_EQ(f.pending.load(), 0u);
  // One reply too many: the stream is out of step.
  EXPECT_EQ(f.p.on_reply(integer(12)), kind::unexpected);
}

TEST(RedisRequestPipelineTest, AGroupGetsItsLastReply) {
  fixture f;
  ASSERT_TRUE(f.submit(0, t0 + timeout, t0, link_state::up, 2));  // ASKING + the command
  f.write(t0);
  EXPECT_EQ(f.p.on_reply(parse("+OK\r\n")), kind::answered);
  EXPECT_FALSE(f.o.got[0]);
  EXPECT_EQ(f.p.on_reply(integer(7)), kind::answered);
  ASSERT_TRUE(f.o.got[0]);
  EXPECT_EQ(f.o.got[0]->value, 7);
}

TEST(RedisRequestPipelineTest, RefusedAtOnceWhenDownStoppedOrAlreadyLate) {
  fixture f;
  EXPECT_FALSE(f.submit(0, t0 + timeout, t0, link_state::down));
  EXPECT_FALSE(f.submit(1, t0 + timeout, t0, link_state::stopped));
  EXPECT_FALSE(f.submit(2, t0, t0));  // its deadline is now: not worth sending
  EXPECT_TRUE(f.submit(3, t0 + timeout, t0, link_state::connecting));  // waits
  EXPECT_EQ(f.o.got[0]->ec, make_error_code(errc::backend_unavailable));
  EXPECT_EQ(f.o.got[1]->ec, make_error_code(errc::backend_shutting_down));
  EXPECT_EQ(f.o.got[2]->ec, make_error_code(errc::backend_timeout));
  EXPECT_FALSE(f.o.got[3]);
  EXPECT_EQ(f.write(t0), "CMD3;");
  EXPECT_EQ(f.pending.load(), 1u);
}

TEST(RedisRequestPipelineTest, ALateRequestFailsAloneAndItsReplyIsDropped) {
  fixture f;
  ASSERT_TRUE(f.submit(0, t0 + 10ms, t0));     // a short deadline of its caller's
  ASSERT_TRUE(f.submit(1, t0 + timeout, t0));  // a whole timeout
  f.write(t0);
  EXPECT_EQ(f.p.next_expiry(std::nullopt), t0 + 10ms);
  // At its deadline it fails; written only 10 ms ago, the connection is not stuck.
  EXPECT_EQ(f.p.expire(t0 + 10ms, std::nullopt), stuck::no);
  ASSERT_TRUE(f.o.got[0]);
  EXPECT_EQ(f.o.got[0]->ec, make_error_code(errc::backend_timeout));
  EXPECT_FALSE(f.o.got[1]);
  // Its reply still comes first, and goes nowhere; the next one is request 1's.
  EXPECT_EQ(f.p.on_reply(integer(1)), kind::answered);
  EXPECT_FALSE(f.o.got[1]);
  EXPECT_EQ(f.p.on_reply(integer(2)), kind::answered);
  ASSERT_TRUE(f.o.got[1]);
  EXPECT_EQ(f.o.got[1]->value, 2);
  EXPECT_EQ(f.pending.load(), 0u);
  EXPECT_EQ(f.p.next_expiry(std::nullopt), std::nullopt);  // idle: no timer
}

TEST(RedisRequestPipelineTest, UnansweredForACommandTimeoutSinceWrittenIsStuck) {
  fixture f;
  ASSERT_TRUE(f.submit(0, t0 + 10ms, t0));
  f.write(t0 + 5ms);  // written 5 ms after it was accepted
  EXPECT_EQ(f.p.expire(t0 + 10ms, std::nullopt), stuck::no);
  // The completed request still waits for its reply: the timer watches the connection.
  EXPECT_EQ(f.p.next_expiry(std::nullopt), t0 + 5ms + timeout);
  EXPECT_EQ(f.p.expire(t0 + 5ms + timeout - 1ms, std::nullopt), stuck::no);
  EXPECT_EQ(f.p.expire(t0 + 5ms + timeout, std::nullopt), stuck::no_reply);
}

TEST(RedisRequestPipelineTest, AWriteThatDoesNotFinishIsStuckAndUnsentRequestsExpire) {
  fixture f;
  ASSERT_TRUE(f.submit(0, t0 + timeout, t0));
  // A write of earlier bytes is in progress since t0: request 0 waits behind it.
  EXPECT_EQ(f.p.next_expiry(t0), t0 + timeout);
  EXPECT_EQ(f.p.expire(t0 + timeout, t0), stuck::write_unfinished);
  ASSERT_TRUE(f.o.got[0]);
  EXPECT_EQ(f.o.got[0]->ec, make_error_code(errc::backend_timeout));
  EXPECT_FALSE(f.p.has_unsent());  // failed unsent requests are not written later
}

TEST(RedisRequestPipelineTest, TheHandshakeComesFirstAndAnErrorRefusesIt) {
  fixture f;
  f.p.begin_handshake(2);
  ASSERT_TRUE(f.submit(0, t0 + timeout, t0, link_state::connecting));
  EXPECT_TRUE(f.p.in_handshake());
  EXPECT_EQ(f.p.on_reply(parse("+OK\r\n")), kind::handshake);
  EXPECT_EQ(f.p.on_reply(parse("+PONG\r\n")), kind::handshake_done);
  EXPECT_FALSE(f.p.in_handshake());
  EXPECT_FALSE(f.o.got[0]);  // not an answer to the request

  fixture g;
  g.p.begin_handshake(2);
  EXPECT_EQ(g.p.on_reply(parse("-WRONGPASS invalid username-password pair\r\n")),
            kind::handshake_refused);
}

TEST(RedisRequestPipelineTest, FailAllCompletesWrittenAndUnsentWithTheirOwnErrors) {
  fixture f;
  f.p.begin_handshake(1);
  ASSERT_TRUE(f.submit(0, t0 + timeout, t0));
  f.write(t0);
  ASSERT_TRUE(f.submit(1, t0 + timeout, t0));
  f.p.fail_all(make_error_code(errc::backend_timeout), make_error_code(errc::backend_unavailable));
  EXPECT_EQ(f.o.got[0]->ec, make_error_code(errc::backend_timeout));      // written
  EXPECT_EQ(f.o.got[1]->ec, make_error_code(errc::backend_unavailable));  // never written
  EXPECT_FALSE(f.p.in_handshake());
  EXPECT_EQ(f.p.in_flight(), 0u);
  EXPECT_EQ(f.pending.load(), 0u);
  EXPECT_EQ(f.p.next_expiry(std::nullopt), std::nullopt);
}

TEST(RedisRequestPipelineTest, FailWrittenKeepsTheUnwrittenForTheNextServer) {
  fixture f;
  ASSERT_TRUE(f.submit(0, t0 + timeout, t0));
  f.write(t0);
  ASSERT_TRUE(f.submit(1, t0 + timeout, t0, link_state::connecting));
  f.p.fail_written(make_error_code(errc::backend_unavailable));
  ASSERT_TRUE(f.o.got[0]);
  EXPECT_EQ(f.o.got[0]->ec, make_error_code(errc::backend_unavailable));
  EXPECT_FALSE(f.o.got[1]);
  EXPECT_EQ(f.write(t0 + 1ms), "CMD1;");  // goes out on the new connection
  EXPECT_EQ(f.p.on_reply(integer(5)), kind::answered);
  EXPECT_EQ(f.o.got[1]->value, 5);
}

}  // namespace
