// Log lines quote requests; a client must not be able to forge or break them.
#include <gtest/gtest.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include "safe_log.hpp"

namespace sluice::daemon {
namespace {

TEST(DaemonSafeLogTest, PrintableTextPassesUnchanged) {
  for (const std::string s :
       {"", "GET /v1/check from 127.0.0.1", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"}) {
    EXPECT_TRUE(is_printable(s)) << s;
    EXPECT_EQ(printable(s), s);
  }
}

TEST(DaemonSafeLogTest, ControlsAndBrokenUtf8AreEscaped) {
  EXPECT_EQ(printable("a\r\nb"), "a\\x0d\\x0ab");
  EXPECT_EQ(printable(std::string("\0\x1b[31m\x7f", 7)), "\\x00\\x1b[31m\\x7f");
  EXPECT_EQ(printable("\xff\xfe"), "\\xff\\xfe");
  EXPECT_EQ(printable("\xc0\xaf"), "\\xc0\\xaf");                    // overlong '/'
  EXPECT_EQ(printable("\xed\xa0\x80"), "\\xed\\xa0\\x80");           // a UTF-16 surrogate
  EXPECT_EQ(printable("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");  // above U+10FFFF
  EXPECT_EQ(printable("\xc2\x9b"), "\\xc2\\x9b");                    // C1 CSI
  EXPECT_EQ(printable("\xe2\x82"), "\\xe2\\x82");                    // cut short
  // The escape itself is escaped, so "\x0a" in a log line was a newline, not typed text.
  EXPECT_EQ(printable("\\x0a"), "\\\\x0a");
  EXPECT_FALSE(is_printable("\\"));
}

class capture_sink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  std::vector<std::string> lines;

 protected:
  void sink_it_(const spdlog::details::log_msg& m) override {
    lines.emplace_back(m.payload.data(), m.payload.size());
  }
  void flush_() override {}
};

TEST(DaemonSafeLogTest, TheSinkEscapesEveryMessage) {
  auto inner = std::make_shared<capture_sink>();
  spdlog::logger log("t", std::make_shared<escaping_sink>(inner));
  log.info("GET {} from {}", "/x\r\n[info] forged", "10.0.0.1");
  log.info("plain");
  ASSERT_EQ(inner->lines.size(), 2u);
  EXPECT_EQ(inner->lines[0], "GET /x\\x0d\\x0a[info] forged from 10.0.0.1");
  EXPECT_EQ(inner->lines[1], "plain");
}

}  // namespace
}  // namespace sluice::daemon
