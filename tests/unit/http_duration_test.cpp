// Durations as `sluice check --window` and sluiced's `window:` read them: a whole number and
// one unit, nothing else.
#include <gtest/gtest.h>

#include <limits>
#include <string>

#include <sluice/http/duration.hpp>
#include <sluice/policy.hpp>

namespace sluice::http {
namespace {

using std::chrono::milliseconds;

TEST(HttpDurationTest, EveryUnit) {
  EXPECT_EQ(parse_duration("250ms"), milliseconds(250));
  EXPECT_EQ(parse_duration("1ms"), milliseconds(1));
  EXPECT_EQ(parse_duration("1s"), milliseconds(1000));
  EXPECT_EQ(parse_duration("90s"), milliseconds(90'000));
  EXPECT_EQ(parse_duration("1m"), milliseconds(60'000));
  EXPECT_EQ(parse_duration("1h"), milliseconds(3'600'000));
  EXPECT_EQ(parse_duration("1d"), milliseconds(86'400'000));
  EXPECT_EQ(parse_duration("366d"), max_window);
  EXPECT_EQ(parse_duration("007s"), milliseconds(7000));  // leading zeros are still decimal
}

TEST(HttpDurationTest, AnythingElseIsRefusedWithAReason) {
  for (const char* text :
       {"",    "s",     "ms", "1",  "60000", "1.5s", "1S",  "1Ms",   "1 s",   " 1s", "1s ", "+1s",
        "-1s", "1m30s", "1w", "1y", "1sec",  "1min", "1us", "0x10s", "1e3ms", "１s", "1s\n"}) {
    SCOPED_TRACE(text);
    std::string why;
    EXPECT_EQ(parse_duration(text, &why), std::nullopt);
    EXPECT_EQ(why, "\"" + std::string(text) +
                       "\" is not a duration: want a whole number and a unit ms, s, m, h or d "
                       "(e.g. 250ms, 1s, 1m, 1h, 1d)");
  }
  EXPECT_EQ(parse_duration("1.5s"), std::nullopt);  // `why` is optional
}

TEST(HttpDurationTest, ZeroIsRefused) {
  for (const char* text : {"0ms", "0s", "0m", "0h", "0d", "000s"}) {
    SCOPED_TRACE(text);
    std::string why;
    EXPECT_EQ(parse_duration(text, &why), std::nullopt);
    EXPECT_EQ(why, "\"" + std::string(text) + "\" is zero: a duration must be at least 1ms");
  }
}

TEST(HttpDurationTest, OverflowIsRefusedNotWrapped) {
  constexpr auto max = std::numeric_limits<std::int64_t>::max();  // 9223372036854775807
  EXPECT_EQ(parse_duration(std::to_string(max) + "ms"), milliseconds(max));
  EXPECT_EQ(parse_duration(std::to_string(max / 1000) + "s"), milliseconds(max / 1000 * 1000));
  EXPECT_EQ(parse_duration(std::to_string(max / 86'400'000) + "d"),
            milliseconds(max / 86'400'000 * 86'400'000));
  for (const std::string& text :
       {std::string("9223372036854775808ms"), std::to_string(max / 1000 + 1) + "s",
        std::to_string(max / 60'000 + 1) + "m", std::to_string(max / 3'600'000 + 1) + "h",
        std::to_string(max / 86'400'000 + 1) + "d",
        std::string("99999999999999999999999999999999d")}) {
    SCOPED_TRACE(text);
    std::string why;
    EXPECT_EQ(parse_duration(text, &why), std::nullopt);
    EXPECT_EQ(why, "\"" + text + "\" is too long a duration (more than 2^63 - 1 ms)");
  }
}

}  // namespace
}  // namespace sluice::http
