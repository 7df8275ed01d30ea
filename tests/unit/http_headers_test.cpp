// Response headers and problem+json bodies, value by value.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <sluice/http/headers.hpp>

namespace sluice::http {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

policy bucket(std::uint64_t capacity, double rate) {
  policy p;
  p.capacity = capacity;
  p.refill_per_second = rate;
  return p;
}

policy window(algorithm a, std::uint64_t limit, milliseconds length) {
  policy p;
  p.algorithm = a;
  p.limit = limit;
  p.window = length;
  return p;
}

decision allowed(std::uint64_t limit, std::uint64_t remaining, milliseconds reset) {
  decision d;
  d.allowed = true;
  d.limit = limit;
  d.remaining = remaining;
  d.reset_after = reset;
  return d;
}

decision denied(std::uint64_t limit, milliseconds retry, milliseconds reset) {
  decision d;
  d.allowed = false;
  d.limit = limit;
  d.remaining = 0;
  d.retry_after = retry;
  d.reset_after = reset;
  return d;
}

std::string value(const std::vector<header_field>& h, std::string_view name) {
  for (const auto& f : h) {
    if (f.name == name) return f.value;
  }
  return "<absent>";
}

TEST(HttpHeadersTest, CeilSecondsRoundsUp) {
  EXPECT_EQ(ceil_seconds(milliseconds(0)), seconds(0));
  EXPECT_EQ(ceil_seconds(milliseconds(1)), seconds(1));
  EXPECT_EQ(ceil_seconds(milliseconds(999)), seconds(1));
  EXPECT_EQ(ceil_seconds(milliseconds(1000)), seconds(1));
  EXPECT_EQ(ceil_seconds(milliseconds(1001)), seconds(2));
  EXPECT_EQ(ceil_seconds(milliseconds(-5)), seconds(0));
}

TEST(HttpHeadersTest, AllowedDecision) {
  const auto h = rate_limit_headers(allowed(100, 37, milliseconds(6300)), "api", bucket(100, 10));
  const std::vector<header_field> want{
      {"X-RateLimit-Limit", "100"},      {"X-RateLimit-Remaining", "37"},
      {"X-RateLimit-Reset", "7"},        {"RateLimit-Policy", "\"api\";q=100;w=10"},
      {"RateLimit", "\"api\";r=37;t=7"},
  };
  EXPECT_EQ(h, want);
}

TEST(HttpHeadersTest, DeniedDecisionRetryAfterRoundsUp) {
  const auto p = bucket(5, 0.1);
  auto retry = [&](milliseconds ms) {
    return value(rate_limit_headers(denied(5, ms, milliseconds(50'000)), "login", p),
                 "Retry-After");
  };
  EXPECT_EQ(retry(milliseconds(1)), "1");
  EXPECT_EQ(retry(milliseconds(1000)), "1");
  EXPECT_EQ(retry(milliseconds(1001)), "2");
  EXPECT_EQ(retry(milliseconds(10'000)), "10");
  EXPECT_EQ(retry(milliseconds(0)), "1");  // a denial never says "retry now"

  const auto h =
      rate_limit_headers(denied(5, milliseconds(9001), milliseconds(50'000)), "login", p);
  const std::vector<header_field> want{
      {"X-RateLimit-Limit", "5"},
      {"X-RateLimit-Remaining", "0"},
      {"X-RateLimit-Reset", "50"},
      {"RateLimit-Policy", "\"login\";q=5;w=50"},
      {"RateLimit", "\"login\";r=0;t=10"},  // t never ends after Retry-After
      {"Retry-After", "10"},
  };
  EXPECT_EQ(h, want);
}

TEST(HttpHeadersTest, PolicyWindow) {
  EXPECT_EQ(policy_window_seconds(bucket(100, 10)), 10u);
  EXPECT_EQ(policy_window_seconds(bucket(5, 0.1)), 50u);
  EXPECT_EQ(policy_window_seconds(bucket(10, 3)), 4u);    // 3.33 s rounds up
  EXPECT_EQ(policy_window_seconds(bucket(1, 1000)), 1u);  // never 0
  // The rate in force: 0.0015/s is kept as 0.002/s (whole milli-tokens), so the bucket is
  // full again after 500 s, which is what X-RateLimit-Reset and retry times say too.
  EXPECT_EQ(policy_window_seconds(bucket(1, 0.0015)), 500u);
}

// A window's RateLimit-Policy is its limit per its own length (in whole seconds, rounded up,
// never 0); a gcra bucket's is like a token bucket's, the time to fill from empty.
TEST(HttpHeadersTest, PolicyWindowOfEveryAlgorithm) {
  for (const auto a :
       {algorithm::sliding_window, algorithm::sliding_window_counter, algorithm::fixed_window}) {
    SCOPED_TRACE(std::string(to_string(a)));
    EXPECT_EQ(policy_window_seconds(window(a, 100, seconds(60))), 60u);
    EXPECT_EQ(policy_window_seconds(window(a, 100, seconds(3600))), 3600u);
    EXPECT_EQ(policy_window_seconds(window(a, 100, seconds(86'400))), 86'400u);
    EXPECT_EQ(policy_window_seconds(window(a, 100, milliseconds(1500))), 2u);
    EXPECT_EQ(policy_window_seconds(window(a, 100, milliseconds(250))), 1u);  // never 0
    EXPECT_EQ(policy_window_seconds(window(a, 5, max_window)), 366u * 86'400u);
  }
  auto g = bucket(100, 10);
  g.algorithm = algorithm::gcra;
  EXPECT_EQ(policy_window_seconds(g), 10u);
}

TEST(HttpHeadersTest, WindowDecisions) {
  const auto fixed = window(algorithm::fixed_window, 100, seconds(60));
  EXPECT_EQ(rate_limit_headers(allowed(100, 58, milliseconds(41'200)), "search", fixed),
            (std::vector<header_field>{
                {"X-RateLimit-Limit", "100"},
                {"X-RateLimit-Remaining", "58"},
                {"X-RateLimit-Reset", "42"},
                {"RateLimit-Policy", "\"search\";q=100;w=60"},
                {"RateLimit", "\"search\";r=58;t=42"},
            }));
  const auto sliding = window(algorithm::sliding_window, 2, milliseconds(1500));
  EXPECT_EQ(rate_limit_headers(denied(2, milliseconds(1200), milliseconds(1400)), "burst", sliding),
            (std::vector<header_field>{
                {"X-RateLimit-Limit", "2"},
                {"X-RateLimit-Remaining", "0"},
                {"X-RateLimit-Reset", "2"},
                {"RateLimit-Policy", "\"burst\";q=2;w=2"},
                {"RateLimit", "\"burst\";r=0;t=2"},
                {"Retry-After", "2"},
            }));
}

TEST(HttpHeadersTest, SfStringEscapes) {
  EXPECT_EQ(sf_string("api"), "\"api\"");
  EXPECT_EQ(sf_string("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(sf_string("t\xc3\xa9st\n"), "\"t??st?\"");
}

TEST(HttpHeadersTest, ProblemJson) {
  const auto pr =
      rate_limited_problem(denied(5, milliseconds(1001), milliseconds(50'000)), "login");
  const auto j = nlohmann::json::parse(to_json(pr));
  EXPECT_EQ(j["type"], "https://iana.org/assignments/http-problem-types#quota-exceeded");
  EXPECT_EQ(j["title"], "Quota exceeded");
  EXPECT_EQ(j["status"], 429);
  EXPECT_EQ(j["detail"], "Rate limit of policy \"login\" exceeded; retry in 2 seconds.");
  EXPECT_EQ(j["retry_after"], 2);
  EXPECT_EQ(j["violated-policies"], nlohmann::json::array({"login"}));
  EXPECT_FALSE(j.contains("instance"));
  EXPECT_EQ(j.size(), 6u);

  const auto one = rate_limited_problem(denied(5, milliseconds(1), milliseconds(1)), "x", 403);
  EXPECT_EQ(one.detail, "Rate limit of policy \"x\" exceeded; retry in 1 second.");
  EXPECT_EQ(one.status, 403u);
}

TEST(HttpHeadersTest, ProblemJsonEscapesEverything) {
  problem p;
  p.title = "Bad \"request\"\\";
  p.status = 400;
  p.detail = "line1\nline2\ttab\x01 caf\xc3\xa9 bad\xff end";
  p.instance = "/v1/check";
  const auto text = to_json(p);
  EXPECT_EQ(text.find('\n'), std::string::npos);
  const auto j = nlohmann::json::parse(text);  // throws on invalid JSON or UTF-8
  EXPECT_EQ(j["type"], "about:blank");
  EXPECT_EQ(j["title"], "Bad \"request\"\\");
  EXPECT_EQ(j["detail"], "line1\nline2\ttab\x01 caf\xc3\xa9 bad\xef\xbf\xbd end");
  EXPECT_EQ(j["instance"], "/v1/check");
  EXPECT_FALSE(j.contains("retry_after"));
  EXPECT_FALSE(j.contains("violated-policies"));
  EXPECT_TRUE(text.starts_with(R"({"type":"about:blank","title":"Bad \"request\"\\",)")) << text;
}

TEST(HttpHeadersTest, ResponseForAnEvaluation) {
  auto rules = std::make_shared<const rule_set>(
      std::map<std::string, policy, std::less<>>{{"api", bucket(100, 10)},
                                                 {"login", bucket(5, 0.1)}},
      std::vector<rule>{});
  evaluation e;
  e.rules = rules;
  rule_outcome a;
  a.rule = "r-api";
  a.policy = "api";
  a.result = allowed(100, 99, milliseconds(100));
  rule_outcome l;
  l.rule = "r-login";
  l.policy = "login";
  l.result = denied(5, milliseconds(10'000), milliseconds(50'000));
  rule_outcome s = l;
  s.rule = "r-shadow";
  s.policy = "api";
  s.shadow = true;
  e.outcomes = {a, l, s};

  e.allowed = false;
  e.binding = 1;
  auto r = make_response(e, 403);
  EXPECT_FALSE(r.allowed);
  EXPECT_EQ(r.status, 403u);
  EXPECT_EQ(value(r.headers, "Retry-After"), "10");
  EXPECT_EQ(value(r.headers, "RateLimit"), "\"login\";r=0;t=10");
  const auto j = nlohmann::json::parse(r.body);
  EXPECT_EQ(j["status"], 403);
  EXPECT_EQ(j["retry_after"], 10);
  // The shadow rule's denial is not a violated policy.
  EXPECT_EQ(j["violated-policies"], nlohmann::json::array({"login"}));

  e.allowed = true;
  e.outcomes = {a};
  e.binding = 0;
  r = make_response(e);
  EXPECT_TRUE(r.allowed);
  EXPECT_EQ(r.status, 0u);
  EXPECT_TRUE(r.body.empty());
  EXPECT_EQ(value(r.headers, "X-RateLimit-Remaining"), "99");
  EXPECT_EQ(value(r.headers, "X-RateLimit-Reset"), "1");
  EXPECT_EQ(value(r.headers, "Retry-After"), "<absent>");

  e.binding.reset();
  EXPECT_TRUE(make_response(e).headers.empty());
}

}  // namespace
}  // namespace sluice::http
