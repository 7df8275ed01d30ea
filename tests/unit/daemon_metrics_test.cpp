// sluiced's metrics: series made from request data are bounded, and label values are
// printable UTF-8 whatever bytes a client sent.
#include <gtest/gtest.h>

#include <string>

#include "metrics.hpp"
#include "safe_log.hpp"

namespace sluice::daemon {
namespace {

std::size_t count_lines_starting(const std::string& text, std::string_view prefix) {
  std::size_t n = 0;
  for (std::size_t pos = 0; pos < text.size();) {
    const auto end = text.find('\n', pos);
    const std::string_view line(text.data() + pos,
                                (end == std::string::npos ? text.size() : end) - pos);
    if (line.starts_with(prefix)) ++n;
    if (end == std::string::npos) break;
    pos = end + 1;
  }
  return n;
}

TEST(DaemonMetricsTest, NewDescriptorsPastTheCapGoToTheOverflowSeries) {
  metrics m;
  m.set_max_rls_series(3);
  for (int i = 0; i < 10; ++i)
    m.rls_descriptor("d", "d.key_v" + std::to_string(i), 1, false, 0, false);
  // A series made before the cap keeps counting.
  m.rls_descriptor("d", "d.key_v0", 2, true, 0, false);
  const auto t = m.serialize();
  EXPECT_EQ(count_lines_starting(t, "ratelimit_service_rate_limit_total_hits_total{"), 4u) << t;
  EXPECT_NE(
      t.find(R"(ratelimit_service_rate_limit_total_hits_total{descriptor="__overflow__",domain="d"} 7)"),
      std::string::npos)
      << t;
  EXPECT_NE(
      t.find(R"(ratelimit_service_rate_limit_total_hits_total{descriptor="d.key_v0",domain="d"} 3)"),
      std::string::npos)
      << t;
  EXPECT_NE(
      t.find(R"(ratelimit_service_rate_limit_over_limit_total{descriptor="d.key_v0",domain="d"} 2)"),
      std::string::npos)
      << t;
  EXPECT_NE(t.find(R"(sluice_metric_series_dropped_total{family="rls_descriptor"} 7)"),
            std::string::npos)
      << t;
}

TEST(DaemonMetricsTest, ScrapeSizeIsBoundedByTheCap) {
  metrics m;
  m.set_max_rls_series(100);
  for (int i = 0; i < 200; ++i)
    m.rls_descriptor("d", "d.key_" + std::to_string(i), 1, false, 0, false);
  const auto at_cap = m.serialize().size();
  for (int i = 200; i < 20'000; ++i)
    m.rls_descriptor("d", "d.key_" + std::to_string(i), 1, false, 0, false);
  const auto t = m.serialize();
  // Only the counts' digits grew.
  EXPECT_LT(t.size(), at_cap + 100) << t.size() << " vs " << at_cap;
  EXPECT_EQ(count_lines_starting(t, "ratelimit_service_rate_limit_total_hits_total{"), 101u);
}

TEST(DaemonMetricsTest, LabelValuesArePrintableUtf8) {
  metrics m;
  const std::string raw("d.key_a\0b\x1b\xff\"q\n\\\xc3\xa9", 17);
  m.rls_descriptor("d", raw, 1, false, 0, false);
  m.rls_error(std::string("dom\x1b[2J", 7), "redis_error");
  const auto t = m.serialize();
  // Control bytes and invalid UTF-8 as \xNN, a backslash doubled (then the text format
  // escapes each backslash and quote once more); valid UTF-8 (é) unchanged.
  EXPECT_NE(t.find(R"(descriptor="d.key_a\\x00b\\x1b\\xff\"q\\x0a\\\\é")"), std::string::npos) << t;
  EXPECT_NE(t.find(R"(domain="dom\\x1b[2J")"), std::string::npos) << t;
  // The whole page: printable UTF-8 lines (backslashes aside, which is_printable refuses).
  std::string lines;
  for (char c : t) {
    if (c != '\\') lines += c == '\n' ? ' ' : c;
  }
  EXPECT_TRUE(is_printable(lines));
}

TEST(DaemonMetricsTest, MemoryBackendCountersAreExported) {
  metrics m;
  backend_stats s;
  s.keys = 5;
  s.evicted_live = 3;
  m.backend_counters(s);
  s.evicted_live = 4;
  m.backend_counters(s);
  const auto t = m.serialize();
  EXPECT_NE(t.find("sluice_memory_keys 5\n"), std::string::npos) << t;
  EXPECT_NE(t.find("sluice_memory_evicted_live_total 4\n"), std::string::npos) << t;
}

TEST(DaemonMetricsTest, OverLimitCacheEvictionsAreExported) {
  metrics m;
  limiter_stats s;
  s.cached_denials_evicted = 7;
  m.limiter_counters(s);
  s.cached_denials_evicted = 9;
  m.limiter_counters(s);
  const auto t = m.serialize();
  EXPECT_NE(t.find("sluice_cached_denials_evicted_total 9\n"), std::string::npos) << t;
}

// The over-limit cache's own denials are the limiter's count, exported as it grows (a
// limiter replaced by a reload starts again from zero: its whole count is added).
TEST(DaemonMetricsTest, OverLimitCacheDenialsAreTheLimitersCount) {
  metrics m;
  EXPECT_NE(m.serialize().find("sluice_cached_denials_total 0\n"), std::string::npos);
  limiter_stats s;
  s.cached_denials = 5;
  m.limiter_counters(s);
  s.cached_denials = 12;
  m.limiter_counters(s);
  EXPECT_NE(m.serialize().find("sluice_cached_denials_total 12\n"), std::string::npos);
  s.cached_denials = 3;  // a new limiter
  m.limiter_counters(s);
  EXPECT_NE(m.serialize().find("sluice_cached_denials_total 15\n"), std::string::npos);
}

}  // namespace
}  // namespace sluice::daemon
