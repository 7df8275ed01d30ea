// redis_options are checked once for every topology (src/redis/engine/options.hpp): the
// same option out of range is refused with the same text whichever URL scheme was given,
// before anything connects.
#include <sluice/redis_backend.hpp>

#include <chrono>
#include <functional>
#include <stdexcept>
#include <string>

#include <gtest/gtest.h>
#include <boost/asio/io_context.hpp>

#include "redis/engine/options.hpp"

namespace {

using namespace std::chrono_literals;
using sluice::redis_options;
using sluice::redis::topology;
using sluice::redis::validate_options;

// The message of the std::invalid_argument that validate_options throws; "" when none.
std::string refusal(const redis_options& o, topology t) {
  try {
    validate_options(o, t);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return {};
}

struct bad_option {
  const char* what;
  std::function<void(redis_options&)> set;
  const char* says;
};

TEST(RedisOptionsTest, EachOptionOutOfRangeIsRefusedAlikeOnEveryTopology) {
  const bad_option cases[] = {
      {"connect_timeout 0", [](redis_options& o) { o.connect_timeout = 0ms; }, "timeouts"},
      {"command_timeout < 0", [](redis_options& o) { o.command_timeout = -1ms; }, "timeouts"},
      {"max_in_flight 0", [](redis_options& o) { o.max_in_flight = 0; }, "max_in_flight"},
      {"backoff min 0", [](redis_options& o) { o.reconnect_backoff_min = 0ms; }, "backoff"},
      {"backoff max < min",
       [](redis_options& o) {
         o.reconnect_backoff_min = 100ms;
         o.reconnect_backoff_max = 50ms;
       },
       "backoff"},
  };
  for (const auto t : {topology::standalone, topology::sentinel, topology::cluster}) {
    EXPECT_EQ(refusal(redis_options{}, t), "") << "the defaults are valid";
    for (const auto& c : cases) {
      redis_options o;
      c.set(o);
      EXPECT_NE(refusal(o, t).find(c.says), std::string::npos)
          << c.what << " on topology " << static_cast<int>(t) << ": " << refusal(o, t);
    }
  }
}

TEST(RedisOptionsTest, MaxBatchIsCheckedWhereDecisionsAreBatched) {
  for (const std::size_t n : {std::size_t{0}, std::size_t{1001}}) {
    redis_options o;
    o.max_batch = n;
    EXPECT_NE(refusal(o, topology::standalone).find("max_batch"), std::string::npos);
    // A Sentinel's masters are standalone backends built later, from these options.
    EXPECT_NE(refusal(o, topology::sentinel).find("max_batch"), std::string::npos);
    // A Cluster batches decisions whose keys share a slot.
    EXPECT_NE(refusal(o, topology::cluster).find("max_batch"), std::string::npos);
  }
  redis_options o;
  o.max_batch = 1000;
  EXPECT_EQ(refusal(o, topology::standalone), "");
}

TEST(RedisOptionsTest, RunOnIsForStandaloneOnly) {
  boost::asio::io_context io;
  redis_options o;
  o.run_on = &io;
  EXPECT_EQ(refusal(o, topology::standalone), "");
  EXPECT_NE(refusal(o, topology::cluster).find("not Cluster"), std::string::npos);
  EXPECT_NE(refusal(o, topology::sentinel).find("not Sentinel"), std::string::npos);
}

TEST(RedisOptionsTest, PollBeforeSleepIsRefusedOnClusterOnlyWhenSet) {
  redis_options o;
  EXPECT_EQ(refusal(o, topology::cluster), "") << "unset: each topology's default";
  o.poll_before_sleep = 0us;
  EXPECT_EQ(refusal(o, topology::standalone), "");
  EXPECT_EQ(refusal(o, topology::sentinel), "") << "a Sentinel's master is a standalone backend";
  EXPECT_NE(refusal(o, topology::cluster).find("poll_before_sleep"), std::string::npos);
  o.poll_before_sleep = -1us;
  EXPECT_NE(refusal(o, topology::standalone).find("negative"), std::string::npos);
}

// The one factory reads every scheme and refuses what is not a Redis URL, before anything
// connects, without echoing the URL (it may hold a password).
TEST(RedisOptionsTest, MakeRedisBackendRefusesWhatIsNotARedisUrl) {
  for (const char* url : {"memory", "http://user:secret@h", "redis:/h", ""}) {
    try {
      sluice::make_redis_backend(url);
      ADD_FAILURE() << url << " was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()).find("secret"), std::string::npos) << e.what();
    }
  }
  redis_options o;
  o.poll_before_sleep = 10us;
  EXPECT_THROW(sluice::make_redis_backend("redis+cluster://127.0.0.1:1", o), std::invalid_argument);
  EXPECT_THROW(sluice::make_redis_backend("redis://127.0.0.1:1/x"), std::invalid_argument);
}

}  // namespace
