// The library's messages go where its user says, at the level its user says; never stdout.
#include <gtest/gtest.h>

#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <sluice/log.hpp>

#include "core/log.hpp"

namespace sluice {
namespace {

class LogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    set_log_sink(
        [this](log_level l, std::string_view m) {
          std::lock_guard lock(mu_);
          got_.emplace_back(l, std::string(m));
        },
        log_level::info);
  }
  void TearDown() override { set_log_sink(&log_to_stderr, log_level::warn); }

  std::vector<std::pair<log_level, std::string>> got() {
    std::lock_guard lock(mu_);
    return got_;
  }

  std::mutex mu_;
  std::vector<std::pair<log_level, std::string>> got_;
};

TEST_F(LogTest, MessagesAtOrAboveTheLevelReachTheSink) {
  detail::logf(log_level::debug, "hidden {}", 1);
  detail::logf(log_level::info, "connected to {}:{}", "127.0.0.1", 6379);
  detail::logf(log_level::error, "lost");
  const auto g = got();
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[0], std::make_pair(log_level::info, std::string("connected to 127.0.0.1:6379")));
  EXPECT_EQ(g[1].first, log_level::error);
}

TEST_F(LogTest, TheLevelCanChangeAlone) {
  set_log_level(log_level::error);
  detail::logf(log_level::warn, "quiet now");
  EXPECT_TRUE(got().empty());
  set_log_level(log_level::trace);
  detail::logf(log_level::trace, "loud now");
  EXPECT_EQ(got().size(), 1u);
  set_log_level(log_level::off);
  detail::logf(log_level::error, "off means off");
  EXPECT_EQ(got().size(), 1u);
}

TEST_F(LogTest, AnEmptySinkDropsEverythingAndASinkThatThrowsIsContained) {
  set_log_sink({}, log_level::trace);
  detail::logf(log_level::error, "nowhere");
  set_log_sink([](log_level, std::string_view) { throw std::runtime_error("sink"); },
               log_level::trace);
  EXPECT_NO_THROW(detail::logf(log_level::error, "thrown away"));
}

TEST(LogDefaultTest, TheDefaultWritesWarningsToStderrAndNothingToStdout) {
  set_log_sink(&log_to_stderr, log_level::warn);
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  detail::logf(log_level::info, "not shown");
  detail::logf(log_level::warn, "Redis at {} unreachable", "10.0.0.1:6379");
  const auto out = testing::internal::GetCapturedStdout();
  const auto err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(out, "");
  EXPECT_EQ(err, "sluice: warning: Redis at 10.0.0.1:6379 unreachable\n");
}

}  // namespace
}  // namespace sluice
