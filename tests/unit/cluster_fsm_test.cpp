// The Cluster client's protocol decisions without sockets or clocks
// (src/redis/cluster/cluster_fsm.hpp): canned replies in, what to do out; time moves only
// when a test moves it.
#include <sluice/error.hpp>

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "redis/cluster/cluster_fsm.hpp"
#include "redis/resp.hpp"

namespace sluice::redis::cluster {
namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;
using kind = op_step::kind;

const clock_type::time_point t0 = clock_type::time_point{} + 1h;
const node_address here{"10.0.0.1", 7000};

reply_ptr parse(std::string_view bytes) {
  reply_reader r;
  EXPECT_TRUE(r.feed(bytes.data(), bytes.size()));
  reply_ptr out;
  EXPECT_EQ(r.next(out), reply_reader::status::reply);
  return out;
}

reply_ptr error_reply(std::string_view text) { return parse("-" + std::string(text) + "\r\n"); }

TEST(ClusterOpFsmTest, AResultIsDecoded) {
  op_fsm f(t0 + 50ms);
  const auto r = parse("*2\r\n:1\r\n:5\r\n");
  const auto s = f.on_reply({}, r.get(), here, t0);
  EXPECT_EQ(s.what, kind::decode);
  EXPECT_FALSE(s.refresh);
  // A script's own error is the decoder's too.
  const auto e = error_reply("ERR user_script:1: bad");
  EXPECT_EQ(f.on_reply({}, e.get(), here, t0).what, kind::decode);
}

TEST(ClusterOpFsmTest, MovedRetriesOnTheNewOwnerAndRefreshesTheMap) {
  op_fsm f(t0 + 50ms);
  const auto r = error_reply("MOVED 3999 10.0.0.2:7001");
  const auto s = f.on_reply({}, r.get(), here, t0);
  EXPECT_EQ(s.what, kind::retry);
  EXPECT_EQ(s.target, (node_address{"10.0.0.2", 7001}));
  EXPECT_FALSE(s.asking);
  EXPECT_TRUE(s.refresh);
  EXPECT_TRUE(s.moved);
  EXPECT_FALSE(s.ask);
  EXPECT_EQ(f.redirects(), 1);
}

TEST(ClusterOpFsmTest, AskRetriesOnceWithAskingAndLeavesTheMap) {
  op_fsm f(t0 + 50ms);
  const auto r = error_reply("ASK 12 10.0.0.3:7002");
  const auto s = f.on_reply({}, r.get(), here, t0);
  EXPECT_EQ(s.what, kind::retry);
  EXPECT_EQ(s.target, (node_address{"10.0.0.3", 7002}));
  EXPECT_TRUE(s.asking);
  EXPECT_FALSE(s.refresh);
  EXPECT_TRUE(s.ask);
}

TEST(ClusterOpFsmTest, ATargetWithoutAHostIsTheNodeThatAnswered) {
  op_fsm f(t0 + 50ms);
  const auto r = error_reply("MOVED 1 :7005");
  EXPECT_EQ(f.on_reply({}, r.get(), here, t0).target, (node_address{"10.0.0.1", 7005}));
}

TEST(ClusterOpFsmTest, RedirectionsAreBounded) {
  op_fsm f(t0 + 50ms);
  const auto r = error_reply("MOVED 1 10.0.0.2:7001");
  for (int i = 0; i < max_redirects; ++i) {
    ASSERT_EQ(f.on_reply({}, r.get(), here, t0).what, kind::retry) << i;
  }
  const auto s = f.on_reply({}, r.get(), here, t0);
  EXPECT_EQ(s.what, kind::fail);
  EXPECT_EQ(s.ec, make_error_code(errc::backend_unavailable));
  EXPECT_TRUE(s.moved);  // counted and the map refreshed all the same
  EXPECT_TRUE(s.refresh);
}

TEST(ClusterOpFsmTest, NoRetryPastTheDeadline) {
  op_fsm f(t0 + 50ms);
  const auto r = error_reply("ASK 1 10.0.0.2:7001");
  const auto s = f.on_reply({}, r.get(), here, t0 + 50ms);
  EXPECT_EQ(s.what, kind::fail);
  EXPECT_EQ(s.ec, make_error_code(errc::backend_timeout));
}

TEST(ClusterOpFsmTest, AnErrorOfTheConnectionFailsAndRefreshesUnlessStopping) {
  op_fsm f(t0 + 50ms);
  for (auto e : {errc::backend_unavailable, errc::backend_timeout, errc::backend_overloaded}) {
    const auto s = f.on_reply(make_error_code(e), nullptr, here, t0);
    EXPECT_EQ(s.what, kind::fail);
    EXPECT_EQ(s.ec, make_error_code(e));
    EXPECT_TRUE(s.refresh);
  }
  const auto s = f.on_reply(make_error_code(errc::backend_shutting_down), nullptr, here, t0);
  EXPECT_EQ(s.what, kind::fail);
  EXPECT_FALSE(s.refresh);
}

TEST(ClusterOpFsmTest, TransientClusterErrorsFailAsUnavailableAndRefresh) {
  for (const char* text : {"CLUSTERDOWN The cluster is down", "TRYAGAIN Multiple keys",
                           "READONLY You can't write against a read only replica."}) {
    op_fsm f(t0 + 50ms);
    const auto r = error_reply(text);
    const auto s = f.on_reply({}, r.get(), here, t0);
    EXPECT_EQ(s.what, kind::fail) << text;
    EXPECT_EQ(s.ec, make_error_code(errc::backend_unavailable)) << text;
    EXPECT_TRUE(s.refresh) << text;
  }
}

TEST(ClusterOpFsmTest, NoscriptAfterTheSourceIsAScriptError) {
  op_fsm f(t0 + 50ms);
  const auto r = error_reply("NOSCRIPT No matching script");
  const auto s = f.on_reply({}, r.get(), here, t0);
  EXPECT_EQ(s.what, kind::fail);
  EXPECT_EQ(s.ec, make_error_code(errc::backend_script_error));
}

TEST(ClusterOpFsmTest, ABatchHandedBackOnTryagainIsRetriedAloneOnTheSameNode) {
  op_fsm f(t0 + 50ms);
  const auto r = error_reply("TRYAGAIN Multiple keys request during rehashing of slot");
  const auto s = f.on_handed_back(*r, here, t0);
  EXPECT_EQ(s.what, kind::retry);
  EXPECT_EQ(s.target, here);
  EXPECT_FALSE(s.asking);
  // Alone, the same answer again ends it.
  const auto again = f.on_reply({}, r.get(), here, t0);
  EXPECT_EQ(again.what, kind::fail);
  EXPECT_EQ(again.ec, make_error_code(errc::backend_unavailable));
}

TEST(ClusterOpFsmTest, ADecisionHandedBackFollowsItsRedirection) {
  op_fsm f(t0 + 50ms);
  const auto r = error_reply("ASK 7 10.0.0.4:7003");
  const auto s = f.on_handed_back(*r, here, t0);
  EXPECT_EQ(s.what, kind::retry);
  EXPECT_TRUE(s.asking);
  // Nothing else is handed back; if it were, it is nonsense, not a result.
  const auto ok = parse(":1\r\n");
  const auto odd = op_fsm(t0 + 50ms).on_handed_back(*ok, here, t0);
  EXPECT_EQ(odd.what, kind::fail);
  EXPECT_EQ(odd.ec, make_error_code(errc::backend_protocol_error));
}

using step = refresh_fsm::step;

TEST(ClusterRefreshFsmTest, TheFirstRequestStartsARoundAtOnce) {
  refresh_fsm f;
  const auto s = f.request(t0);
  EXPECT_EQ(s.what, step::kind::start);
  EXPECT_TRUE(f.refreshing());
}

TEST(ClusterRefreshFsmTest, RequestsDuringARoundMakeOneMoreRoundAfterIt) {
  refresh_fsm f;
  ASSERT_EQ(f.request(t0).what, step::kind::start);
  EXPECT_EQ(f.request(t0 + 1ms).what, step::kind::nothing);
  EXPECT_EQ(f.request(t0 + 2ms).what, step::kind::nothing);
  const auto end = f.on_round_done(true);
  EXPECT_TRUE(end.start_again);
  EXPECT_FALSE(end.warn);
  // Again, but not sooner than the minimum interval after the last round started.
  const auto s = f.request(t0 + 3ms);
  EXPECT_EQ(s.what, step::kind::wait);
  EXPECT_EQ(s.at, t0 + refresh_min_interval);
  EXPECT_EQ(f.request(t0 + 4ms).what, step::kind::nothing);  // the wake-up is set already
  EXPECT_EQ(f.on_wakeup(t0 + refresh_min_interval).what, step::kind::start);
  EXPECT_FALSE(f.on_round_done(true).start_again);
}

TEST(ClusterRefreshFsmTest, ARequestAfterTheIntervalStartsAtOnce) {
  refresh_fsm f;
  ASSERT_EQ(f.request(t0).what, step::kind::start);
  ASSERT_FALSE(f.on_round_done(true).start_again);
  EXPECT_EQ(f.request(t0 + refresh_min_interval).what, step::kind::start);
}

TEST(ClusterRefreshFsmTest, FailedRoundsAreRetriedWithADoublingBackoffAndOneWarning) {
  refresh_fsm f;
  auto now = t0;
  ASSERT_EQ(f.request(now).what, step::kind::start);
  auto end = f.on_round_done(false);
  EXPECT_TRUE(end.warn);
  EXPECT_TRUE(end.start_again);  // on its own: nobody may be asking
  std::vector<std::chrono::milliseconds> waits;
  for (int i = 0; i < 6; ++i) {
    const auto s = f.request(now);
    ASSERT_EQ(s.what, step::kind::wait);
    waits.push_back(std::chrono::duration_cast<std::chrono::milliseconds>(s.at - now));
    now = s.at;
    ASSERT_EQ(f.on_wakeup(now).what, step::kind::start);
    end = f.on_round_done(false);
    EXPECT_FALSE(end.warn) << i;  // once per outage
    EXPECT_TRUE(end.start_again);
  }
  EXPECT_EQ(waits,
            (std::vector<std::chrono::milliseconds>{100ms, 200ms, 400ms, 800ms, 1000ms, 1000ms}));
  // A success ends the backoff; the next outage warns again.
  const auto s = f.request(now);
  ASSERT_EQ(s.what, step::kind::wait);
  ASSERT_EQ(f.on_wakeup(s.at).what, step::kind::start);
  EXPECT_FALSE(f.on_round_done(true).start_again);
  EXPECT_EQ(f.backoff(), 0ms);
  ASSERT_EQ(f.request(s.at + refresh_min_interval).what, step::kind::start);
  EXPECT_TRUE(f.on_round_done(false).warn);
}

}  // namespace
}  // namespace sluice::redis::cluster
