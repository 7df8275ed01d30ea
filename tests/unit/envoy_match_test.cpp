// Descriptor matching as the reference rate limit service: the most specific match level by
// level (exact, then wildcard, then key-only), nesting, unlimited, replaces, shadow mode,
// the request's own limit, results in request order, and bucket keys that never collide.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "envoy/rls_config.hpp"
#include "envoy/rls_match.hpp"

namespace sluice::envoy {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr const char* config_yaml = R"(domain: test
descriptors:
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: remote_address
    value: 50.0.0.5
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: path
    value: /api/*
    rate_limit: {unit: minute, requests_per_unit: 100}
  - key: path
    value: /api/v1/*          # never reached: the first wildcard in config order wins
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: path
    value: "*.png"
    rate_limit: {unit: minute, requests_per_unit: 200}
  - key: path
    value: /a*b*c
    rate_limit: {unit: minute, requests_per_unit: 300}
  - key: path
    value: /exact
    rate_limit: {unit: minute, requests_per_unit: 400}
  - key: message_type
    value: marketing
    descriptors:
      - key: to_number
        rate_limit: {unit: day, requests_per_unit: 5}
  - key: to_number
    rate_limit: {unit: day, requests_per_unit: 100}
  - key: internal
    rate_limit: {unlimited: true, name: internal}
  - key: category
    value: read
    rate_limit: {unit: second, requests_per_unit: 50, name: read}
  - key: user_endpoint
    value: special
    rate_limit:
      unit: second
      requests_per_unit: 500
      name: special
      replaces: [{name: read}]
  - key: free_pass
    rate_limit: {unlimited: true, replaces: [{name: read}]}
  - key: shadowed
    shadow_mode: true
    quota_mode: true
    metadata: {route: b}
    rate_limit: {unit: hour, requests_per_unit: 3}
  - key: tb
    rate_limit: {unit: second, requests_per_unit: 10, algorithm: token_bucket, burst: 50}
  - key: tenant
    value: "t-*"
    share_threshold: true
    descriptors:
      - key: path
        rate_limit: {unit: minute, requests_per_unit: 7}
  - key: team
    value: "x-*"
    value_to_metric: true
    rate_limit: {unit: minute, requests_per_unit: 8}
  - key: detailed
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 9}
  - key: vtm
    value_to_metric: true
    rate_limit: {unit: minute, requests_per_unit: 11}
)";

const rls_config& config() {
  static const rls_config c = [] {
    auto r = parse_rls_config({{"test.yaml", config_yaml}});
    if (auto* e = std::get_if<rls_config_error>(&r)) {
      ADD_FAILURE() << e->what();
      return rls_config{};
    }
    return std::get<rls_config>(std::move(r));
  }();
  return c;
}

rls_descriptor desc(std::vector<rls_entry> entries) { return {std::move(entries), {}, {}}; }

std::vector<rls_match> match(std::vector<rls_descriptor> ds, std::string_view domain = "test",
                             const rls_match_options& options = {}) {
  return match_descriptors(config(), domain, ds, options);
}

rls_match match_one(std::vector<rls_entry> entries) {
  auto ms = match({desc(std::move(entries))});
  EXPECT_EQ(ms.size(), 1u);
  return ms.empty() ? rls_match{} : ms[0];
}

TEST(EnvoyMatchTest, KeyOnlyMatchesAnyValueWithItsOwnBucket) {
  const auto m = match_one({{"remote_address", "10.0.0.1"}});
  EXPECT_TRUE(m.matched);
  EXPECT_FALSE(m.unlimited);
  EXPECT_FALSE(m.replaced);
  EXPECT_FALSE(m.shadow_mode);
  EXPECT_FALSE(m.from_override);
  EXPECT_EQ(m.requests_per_unit, 10u);
  EXPECT_EQ(m.unit, rls_unit::second);
  EXPECT_EQ(m.policy.algorithm, algorithm::fixed_window);
  EXPECT_EQ(m.policy.limit, 10u);
  EXPECT_EQ(m.policy.window, seconds(1));
  EXPECT_EQ(m.metric_key, "test.remote_address");
  EXPECT_EQ(m.bucket_key, "rls:{test}:remote_address=10.0.0.1:fixed_window:1000");
  EXPECT_TRUE(m.error.empty());
  ASSERT_NE(m.config, nullptr);
  EXPECT_EQ(m.config->line, 3);

  const auto other = match_one({{"remote_address", "10.0.0.2"}});
  EXPECT_EQ(other.bucket_key, "rls:{test}:remote_address=10.0.0.2:fixed_window:1000");
}

TEST(EnvoyMatchTest, ExactValueBeatsKeyOnly) {
  const auto m = match_one({{"remote_address", "50.0.0.5"}});
  EXPECT_TRUE(m.matched);
  EXPECT_EQ(m.requests_per_unit, 0u);  // a limit nothing fits: OVER_LIMIT, no backend
  EXPECT_EQ(m.bucket_key, "");
  EXPECT_EQ(m.metric_key, "test.remote_address_50.0.0.5");
  ASSERT_NE(m.config, nullptr);
  EXPECT_EQ(m.config->value, "50.0.0.5");
}

TEST(EnvoyMatchTest, WildcardsMatchAnywhereInTheValueFirstInConfigOrder) {
  auto m = match_one({{"path", "/api/users"}});
  EXPECT_TRUE(m.matched);
  EXPECT_EQ(m.requests_per_unit, 100u);
  EXPECT_EQ(m.metric_key, "test.path_/api/*");  // the reference names the pattern
  EXPECT_EQ(m.bucket_key, "rls:{test}:path=/api/users:fixed_window:60000");

  m = match_one({{"path", "/api/v1/users"}});  // both /api/* and /api/v1/* match: the first
  EXPECT_EQ(m.requests_per_unit, 100u);

  m = match_one({{"path", "/api/"}});  // `*` matches nothing too
  EXPECT_EQ(m.requests_per_unit, 100u);

  m = match_one({{"path", "/img/logo.png"}});
  EXPECT_EQ(m.requests_per_unit, 200u);
  EXPECT_EQ(m.metric_key, "test.path_*.png");

  for (const char* v : {"/abc", "/aXbYc", "/abbc", "/a-b-c-c"}) {
    m = match_one({{"path", v}});
    EXPECT_EQ(m.requests_per_unit, 300u) << v;
  }
  for (const char* v : {"/ab", "/acb", "/a-c", "/abcd", "/exac"}) {
    m = match_one({{"path", v}});
    EXPECT_FALSE(m.matched) << v;
    EXPECT_EQ(m.config, nullptr) << v;
  }

  m = match_one({{"path", "/exact"}});
  EXPECT_EQ(m.requests_per_unit, 400u);
  // A value spelled like the pattern is an exact match of it.
  m = match_one({{"path", "/api/v1/*"}});
  EXPECT_EQ(m.requests_per_unit, 1u);
  // Keys are literal: a key that only starts like one matches nothing.
  EXPECT_FALSE(match_one({{"paths", "/api/x"}}).matched);
}

TEST(EnvoyMatchTest, NestedDescriptorsMatchOnlyAtTheirDepth) {
  auto m = match_one({{"message_type", "marketing"}, {"to_number", "2061111111"}});
  EXPECT_TRUE(m.matched);
  EXPECT_EQ(m.requests_per_unit, 5u);
  EXPECT_EQ(m.unit, rls_unit::day);
  EXPECT_EQ(m.policy.window, hours(24));
  EXPECT_EQ(m.metric_key, "test.message_type_marketing.to_number");
  EXPECT_EQ(m.bucket_key,
            "rls:{test}:message_type=marketing:to_number=2061111111:fixed_window:86400000");

  m = match_one({{"to_number", "2061111111"}});
  EXPECT_EQ(m.requests_per_unit, 100u);
  EXPECT_EQ(m.bucket_key, "rls:{test}:to_number=2061111111:fixed_window:86400000");

  // The placeholder level has no limit of its own.
  EXPECT_FALSE(match_one({{"message_type", "marketing"}}).matched);
  // No key-only message_type: the walk stops at the first level.
  EXPECT_FALSE(match_one({{"message_type", "other"}, {"to_number", "1"}}).matched);
  // A request deeper than the config matches nothing (remote_address has no children).
  EXPECT_FALSE(match_one({{"remote_address", "10.0.0.1"}, {"extra", "x"}}).matched);
  // Order matters: entries are levels.
  EXPECT_FALSE(match_one({{"to_number", "1"}, {"message_type", "marketing"}}).matched);
  // A descriptor without entries matches nothing.
  EXPECT_FALSE(match_one({}).matched);
}

TEST(EnvoyMatchTest, UnlimitedMatchesButCountsNothing) {
  const auto m = match_one({{"internal", "yes"}});
  EXPECT_FALSE(m.matched);
  EXPECT_TRUE(m.unlimited);
  EXPECT_EQ(m.name, "internal");
  EXPECT_EQ(m.bucket_key, "");
  EXPECT_EQ(m.metric_key, "test.internal");
  EXPECT_NE(m.config, nullptr);
}

TEST(EnvoyMatchTest, ReplacesDropsTheNamedLimitWhenBothMatch) {
  auto ms = match({desc({{"category", "read"}}), desc({{"user_endpoint", "special"}})});
  ASSERT_EQ(ms.size(), 2u);
  EXPECT_FALSE(ms[0].matched);
  EXPECT_TRUE(ms[0].replaced);
  EXPECT_EQ(ms[0].name, "read");
  EXPECT_EQ(ms[0].bucket_key, "");
  EXPECT_EQ(ms[0].metric_key, "test.category_read");
  EXPECT_TRUE(ms[1].matched);
  EXPECT_FALSE(ms[1].replaced);
  EXPECT_EQ(ms[1].requests_per_unit, 500u);

  // The replacing descriptor may come first; replaces looks at the whole request.
  ms = match({desc({{"user_endpoint", "special"}}), desc({{"category", "read"}})});
  EXPECT_TRUE(ms[0].matched);
  EXPECT_TRUE(ms[1].replaced);

  // Alone, the named limit applies.
  ms = match({desc({{"category", "read"}})});
  EXPECT_TRUE(ms[0].matched);
  EXPECT_FALSE(ms[0].replaced);

  // An unlimited limit replaces nothing (the reference drops it before the replaces pass).
  ms = match({desc({{"category", "read"}}), desc({{"free_pass", "x"}})});
  EXPECT_TRUE(ms[0].matched);
  EXPECT_TRUE(ms[1].unlimited);
}

TEST(EnvoyMatchTest, ShadowAndQuotaModeAndMetadataComeFromTheNode) {
  const auto m = match_one({{"shadowed", "v"}});
  EXPECT_TRUE(m.matched);
  EXPECT_TRUE(m.shadow_mode);
  EXPECT_TRUE(m.quota_mode);
  EXPECT_EQ(m.policy.window, hours(1));
  ASSERT_NE(m.config, nullptr);
  EXPECT_EQ(m.config->metadata_json, R"({"route":"b"})");
}

TEST(EnvoyMatchTest, BucketAlgorithmsKeyByAlgorithmAndUnit) {
  const auto m = match_one({{"tb", "k"}});
  EXPECT_TRUE(m.matched);
  EXPECT_EQ(m.policy.algorithm, algorithm::token_bucket);
  EXPECT_EQ(m.policy.capacity, 50u);
  EXPECT_DOUBLE_EQ(m.policy.refill_per_second, 10.0);
  EXPECT_EQ(m.bucket_key, "rls:{test}:tb=k:token_bucket:1000");
}

TEST(EnvoyMatchTest, ShareThresholdGivesEveryMatchingValueOneBucket) {
  const auto a = match_one({{"tenant", "t-1"}, {"path", "/x"}});
  const auto b = match_one({{"tenant", "t-2"}, {"path", "/x"}});
  EXPECT_TRUE(a.matched);
  EXPECT_EQ(a.requests_per_unit, 7u);
  EXPECT_EQ(a.bucket_key, "rls:{test}:tenant=t-*:path=/x:fixed_window:60000");
  EXPECT_EQ(b.bucket_key, a.bucket_key);
  EXPECT_EQ(a.metric_key, "test.tenant_t-*.path");
  // Other levels keep their values.
  EXPECT_NE(match_one({{"tenant", "t-1"}, {"path", "/y"}}).bucket_key, a.bucket_key);
  // Without share_threshold each value counts alone.
  EXPECT_NE(match_one({{"path", "/api/a"}}).bucket_key, match_one({{"path", "/api/b"}}).bucket_key);
}

// share_threshold deeper in the tree, beside detailed_metric and value_to_metric.
TEST(EnvoyMatchTest, ShareThresholdPatternsTravelDownTheTree) {
  auto parsed = parse_rls_config({{"share.yaml", R"(domain: s
descriptors:
  - key: user
    value: u-*
    share_threshold: true
    descriptors:
      - key: res
        value: r*x
        share_threshold: true
        descriptors:
          - key: verb
            rate_limit: {unit: second, requests_per_unit: 1}
  - key: svc
    value: svc/*
    share_threshold: true
    descriptors:
      - key: endpoint
        detailed_metric: true
        rate_limit: {unit: second, requests_per_unit: 2}
  - key: route
    value: api/*
    share_threshold: true
    value_to_metric: true
    rate_limit: {unit: second, requests_per_unit: 3}
  - key: file
    value: test1
    rate_limit: {unit: second, requests_per_unit: 4}
  - key: file
    value: test*
    share_threshold: true
    rate_limit: {unit: second, requests_per_unit: 5}
)"}});
  ASSERT_TRUE(std::holds_alternative<rls_config>(parsed));
  const auto& c = std::get<rls_config>(parsed);
  const auto one = [&](std::vector<rls_entry> entries) {
    return match_descriptors(c, "s", std::vector<rls_descriptor>{desc(std::move(entries))})[0];
  };

  auto m = one({{"user", "u-1"}, {"res", "r-9-x"}, {"verb", "GET"}});
  EXPECT_EQ(m.requests_per_unit, 1u);
  EXPECT_EQ(m.bucket_key, "rls:{s}:user=u-*:res=r*x:verb=GET:fixed_window:1000");
  EXPECT_EQ(m.metric_key, "s.user_u-*.res_r*x.verb");
  EXPECT_EQ(one({{"user", "u-2"}, {"res", "rx"}, {"verb", "GET"}}).bucket_key, m.bucket_key);

  m = one({{"svc", "svc/a"}, {"endpoint", "e1"}});
  EXPECT_EQ(m.requests_per_unit, 2u);
  EXPECT_EQ(m.metric_key, "s.svc_svc/*.endpoint_e1");
  EXPECT_EQ(m.bucket_key, "rls:{s}:svc=svc/*:endpoint=e1:fixed_window:1000");
  EXPECT_EQ(one({{"svc", "svc/b"}, {"endpoint", ""}}).metric_key, "s.svc_svc/*.endpoint");

  m = one({{"route", "api/users"}});  // share_threshold wins over value_to_metric
  EXPECT_EQ(m.metric_key, "s.route_api/*");
  EXPECT_EQ(m.bucket_key, "rls:{s}:route=api/*:fixed_window:1000");

  m = one({{"file", "test1"}});  // an exact value beats the shared wildcard
  EXPECT_EQ(m.requests_per_unit, 4u);
  EXPECT_EQ(m.bucket_key, "rls:{s}:file=test1:fixed_window:1000");
  m = one({{"file", "test2"}});
  EXPECT_EQ(m.requests_per_unit, 5u);
  EXPECT_EQ(m.bucket_key, "rls:{s}:file=test*:fixed_window:1000");
}

TEST(EnvoyMatchTest, MetricKeysFollowDetailedMetricAndValueToMetric) {
  EXPECT_EQ(match_one({{"team", "x-42"}}).metric_key, "test.team_x-42");  // wildcard + value
  EXPECT_EQ(match_one({{"detailed", "foo"}}).metric_key, "test.detailed_foo");
  EXPECT_EQ(match_one({{"detailed", ""}}).metric_key, "test.detailed_");
  EXPECT_EQ(match_one({{"vtm", "foo"}}).metric_key, "test.vtm_foo");
  EXPECT_EQ(match_one({{"vtm", ""}}).metric_key, "test.vtm");
  EXPECT_EQ(match_one({{"to_number", "5"}}).metric_key, "test.to_number");
}

TEST(EnvoyMatchTest, TheRequestsOwnLimitOverridesTheConfig) {
  rls_descriptor d = desc({{"remote_address", "50.0.0.5"}, {"user", ""}});
  d.limit = rls_override{42, rls_unit::minute};
  auto ms = match({d});
  ASSERT_EQ(ms.size(), 1u);
  const auto& m = ms[0];
  EXPECT_TRUE(m.matched);
  EXPECT_TRUE(m.from_override);
  EXPECT_FALSE(m.shadow_mode);
  EXPECT_EQ(m.name, "");
  EXPECT_EQ(m.config, nullptr);
  EXPECT_EQ(m.requests_per_unit, 42u);
  EXPECT_EQ(m.unit, rls_unit::minute);
  EXPECT_EQ(m.policy.algorithm, algorithm::fixed_window);
  EXPECT_EQ(m.policy.limit, 42u);
  EXPECT_EQ(m.policy.window, seconds(60));
  EXPECT_EQ(m.metric_key, "test.remote_address_50.0.0.5.user");
  EXPECT_EQ(m.bucket_key, "rls:{test}:remote_address=50.0.0.5:user=:fixed_window:60000");

  // Even entries the config does not know get the override.
  d = desc({{"unknown_key", "v"}});
  d.limit = rls_override{3, rls_unit::week};
  ms = match({d});
  EXPECT_TRUE(ms[0].matched);
  EXPECT_EQ(ms[0].policy.window, hours(24 * 7));

  // UNKNOWN cannot be counted: an error for the service to answer.
  d.limit = rls_override{3, rls_unit::unknown};
  ms = match({d});
  EXPECT_FALSE(ms[0].matched);
  EXPECT_EQ(ms[0].error, "the descriptor's limit override has unit UNKNOWN");

  // In a domain the config does not have, nothing applies, overrides included.
  d.limit = rls_override{3, rls_unit::second};
  ms = match({d}, "nope");
  EXPECT_FALSE(ms[0].matched);
  EXPECT_TRUE(ms[0].error.empty());
}

TEST(EnvoyMatchTest, UnknownDomainMatchesNothing) {
  const auto ms = match({desc({{"remote_address", "1"}}), desc({{"path", "/api/x"}})}, "other");
  ASSERT_EQ(ms.size(), 2u);
  for (const auto& m : ms) {
    EXPECT_FALSE(m.matched);
    EXPECT_FALSE(m.unlimited);
    EXPECT_EQ(m.config, nullptr);
    EXPECT_EQ(m.metric_key, "");
  }
}

TEST(EnvoyMatchTest, ResultsComeInRequestOrder) {
  rls_descriptor over = desc({{"x", "y"}});
  over.limit = rls_override{1, rls_unit::second};
  const auto ms = match({desc({{"to_number", "1"}}), desc({{"nothing", "here"}}),
                         desc({{"internal", "i"}}), over, desc({{"path", "/exact"}})});
  ASSERT_EQ(ms.size(), 5u);
  EXPECT_EQ(ms[0].requests_per_unit, 100u);
  EXPECT_FALSE(ms[1].matched);
  EXPECT_FALSE(ms[1].unlimited);
  EXPECT_TRUE(ms[2].unlimited);
  EXPECT_TRUE(ms[3].from_override);
  EXPECT_EQ(ms[4].requests_per_unit, 400u);
}

TEST(EnvoyMatchTest, BucketKeysAreEscapedAndNeverCollide) {
  const auto key = [](std::string_view domain, std::vector<rls_entry> entries,
                      algorithm a = algorithm::fixed_window, milliseconds w = seconds(1),
                      rls_key_tag tag = rls_key_tag::domain) {
    return bucket_key(domain, entries, a, w, tag);
  };
  EXPECT_EQ(key("d{1}", {{"k:1", "v=2%"}, {"", "a b"}}),
            "rls:{d%7B1%7D}:k%3A1=v%3D2%25:=a%20b:fixed_window:1000");
  EXPECT_EQ(key("d", {{"k", "v"}}, algorithm::gcra, hours(1), rls_key_tag::none),
            "rls:d:k=v:gcra:3600000");

  // Inputs that a naive join ("k=v:k2=v2") would confuse.
  const std::vector<std::string> keys{
      key("d", {{"a", "b"}}),
      key("d", {{"a", "b:c=d"}}),
      key("d", {{"a", "b"}, {"c", "d"}}),
      key("d", {{"a=b", ""}}),
      key("d", {{"a", "=b"}}),
      key("d", {{"a", ""}}),
      key("d", {{"a", ""}, {"", ""}}),
      key("d", {}),
      key("d:a=b", {}),
      key("d}", {{"a", "b"}}),
      key("d", {{"a", "b"}}, algorithm::fixed_window, seconds(60)),
      key("d", {{"a", "b"}}, algorithm::sliding_window),
      key("d", {{"a", "b"}}, algorithm::fixed_window, seconds(1), rls_key_tag::none),
      key("e", {{"a", "b"}}),
      key("d", {{"a", "b%3Ac%3Dd"}}),
      key("d", {{"a", "b%"}}),
      key("d", {{"a", "b%25"}}),
      key("d", {{"b", "a"}}),
      key("d", {{"a", "B"}}),
      key("d", {{"a", std::string("b\0", 2)}}),
  };
  EXPECT_EQ(std::set<std::string>(keys.begin(), keys.end()).size(), keys.size());
  // Only separators appear unescaped: one hash tag, and only the domain inside it.
  for (const auto& k : keys) {
    if (k.find('{') == std::string::npos) continue;
    EXPECT_EQ(k.find('{'), 4u) << k;
    EXPECT_EQ(k.find('{', 5), std::string::npos) << k;
    EXPECT_EQ(std::count(k.begin(), k.end(), '}'), 1) << k;
  }

  // Through matching: distinct request descriptors, distinct buckets.
  std::set<std::string> seen;
  const std::vector<std::vector<rls_entry>> requests{
      {{"remote_address", "1"}},
      {{"remote_address", "1:"}},
      {{"remote_address", "1%3A"}},
      {{"to_number", "1"}},
      {{"path", "/api/a"}},
      {{"path", "/api/a:b"}},
      {{"message_type", "marketing"}, {"to_number", "1"}},
      {{"tb", "1"}},
      {{"vtm", "1"}},
  };
  for (const auto& r : requests) {
    const auto m = match_one(r);
    ASSERT_TRUE(m.matched);
    EXPECT_TRUE(seen.insert(m.bucket_key).second) << m.bucket_key;
  }
}

TEST(EnvoyMatchTest, WithoutATagKeysCarryNoBraces) {
  const auto ms =
      match({desc({{"remote_address", "10.0.0.1"}})}, "test", {.tag = rls_key_tag::none});
  ASSERT_EQ(ms.size(), 1u);
  EXPECT_EQ(ms[0].bucket_key, "rls:test:remote_address=10.0.0.1:fixed_window:1000");
}

}  // namespace
}  // namespace sluice::envoy
