// The daemon's YAML config: the documented shape parses as written, defaults are what
// docs/daemon.md says, and every invalid config names file, line and field.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "app.hpp"
#include "config.hpp"

namespace sluice::daemon {
namespace {

// The example from the issue and docs/daemon.md, verbatim.
constexpr const char* issue_example = R"(listen: 127.0.0.1:8080
backend: memory                 # or redis://127.0.0.1:6379/0
on_backend_failure: open        # open | closed | local; a policy may override it
backend_timeout_ms: 50
deny_status: 429                # for /v1/auth; nginx auth_request needs 403 (or 401)
trusted_proxies: [127.0.0.1/32, 10.0.0.0/8]
policies:
  api:   { algorithm: token_bucket, capacity: 100, refill_per_second: 10 }
  login: { algorithm: token_bucket, capacity: 5, refill_per_second: 0.1, on_backend_failure: closed }
rules:
  - { name: login, match: { path_prefix: /login, methods: [POST] }, key: ip, policy: login }
  - { name: api,   match: { path_prefix: /api }, key: "header:X-API-Key", policy: api }
  - { name: default, match: { path_prefix: / }, key: ip, policy: api, shadow: true }
)";

// Parses `yaml` expecting a config_error; returns it.
config_error error_of(const std::string& yaml) {
  try {
    parse_config(yaml, "test.yaml");
  } catch (const config_error& e) {
    return e;
  }
  ADD_FAILURE() << "no config_error for:\n" << yaml;
  return config_error("", 0, "", "");
}

constexpr const char* one_policy = "policies:\n  api: {capacity: 10, refill_per_second: 1}\n";

TEST(DaemonConfigTest, IssueExampleParsesAsWritten) {
  const auto c = parse_config(issue_example, "example.yaml");
  EXPECT_EQ(c.source, "example.yaml");
  EXPECT_EQ(c.listen_host, "127.0.0.1");
  EXPECT_EQ(c.listen_port, 8080);
  EXPECT_EQ(c.listen(), "127.0.0.1:8080");
  EXPECT_EQ(c.backend, "memory");
  EXPECT_EQ(c.on_backend_failure, failure_mode::open);
  EXPECT_EQ(c.backend_timeout, std::chrono::milliseconds{50});
  EXPECT_EQ(c.deny_status, 429u);
  ASSERT_EQ(c.keys.trusted_proxies.size(), 2u);
  EXPECT_EQ(http::to_string(c.keys.trusted_proxies[1]), "10.0.0.0/8");

  ASSERT_EQ(c.policies.size(), 2u);
  const auto& api = c.policies.at("api");
  EXPECT_EQ(api.algorithm, algorithm::token_bucket);
  EXPECT_EQ(api.capacity, 100u);
  EXPECT_DOUBLE_EQ(api.refill_per_second, 10);
  EXPECT_EQ(api.on_failure, failure_mode::open);  // inherited from on_backend_failure
  const auto& login = c.policies.at("login");
  EXPECT_EQ(login.capacity, 5u);
  EXPECT_DOUBLE_EQ(login.refill_per_second, 0.1);
  EXPECT_EQ(login.on_failure, failure_mode::closed);  // overridden

  ASSERT_EQ(c.rules.size(), 3u);
  EXPECT_EQ(c.rules[0].name, "login");
  EXPECT_EQ(c.rules[0].match.path_prefix, "/login");
  EXPECT_EQ(c.rules[0].match.methods, std::vector<std::string>{"POST"});
  EXPECT_EQ(c.rules[0].key.to_string(), "ip");
  EXPECT_EQ(c.rules[0].policy, "login");
  EXPECT_FALSE(c.rules[0].shadow);
  EXPECT_EQ(c.rules[1].key.to_string(), http::key_spec::parse("header:X-API-Key")->to_string());
  EXPECT_EQ(c.rules[1].match.path_prefix, "/api");
  EXPECT_TRUE(c.rules[1].match.methods.empty());
  EXPECT_TRUE(c.rules[2].shadow);
  EXPECT_EQ(c.rules[2].match.path_prefix, "/");
}

TEST(DaemonConfigTest, DefaultsOfAMinimalConfig) {
  const auto c = parse_config(one_policy, "min.yaml");
  EXPECT_EQ(c.listen(), "127.0.0.1:8080");
  EXPECT_EQ(c.threads, 0u);
  EXPECT_EQ(c.log_level, "info");
  EXPECT_EQ(c.backend, "memory");
  EXPECT_EQ(c.key_prefix, "sluice:");
  EXPECT_EQ(c.on_backend_failure, failure_mode::open);
  EXPECT_EQ(c.backend_timeout, std::chrono::milliseconds{50});
  EXPECT_EQ(c.backend_connect_timeout, std::chrono::milliseconds{250});
  EXPECT_EQ(c.memory_max_keys, 1'000'000u);
  EXPECT_FALSE(c.redis_connection_per_thread) << "one shared Redis connection by default";
  EXPECT_EQ(c.deny_status, 429u);
  EXPECT_TRUE(c.keys.trusted_proxies.empty());
  EXPECT_EQ(c.keys.ipv6_prefix, 64u);
  EXPECT_EQ(c.keys.ipv4_prefix, 32u);
  EXPECT_EQ(c.keys.header, http::forwarded_header::x_forwarded_for);
  EXPECT_EQ(c.limits.max_body_bytes, 8192u);
  EXPECT_EQ(c.limits.max_header_bytes, 8192u);
  EXPECT_EQ(c.limits.idle_timeout, std::chrono::milliseconds{30'000});
  EXPECT_EQ(c.limits.shutdown_timeout, std::chrono::milliseconds{10'000});
  EXPECT_EQ(c.limits.request_head_timeout, std::chrono::milliseconds{10'000});
  EXPECT_EQ(c.limits.max_connections, 4096u);
  EXPECT_TRUE(c.rules.empty());
  EXPECT_EQ(c.policies.at("api").algorithm, algorithm::token_bucket);
  EXPECT_EQ(c.policies.at("api").on_failure, failure_mode::open);
}

TEST(DaemonConfigTest, EveryOptionalKeyIsRead) {
  const auto c = parse_config(R"(listen: "[::1]:9090"
threads: 3
log_level: debug
backend: redis://127.0.0.1:6390/2
key_prefix: "rl:"
on_backend_failure: local
backend_timeout_ms: 20
backend_connect_timeout_ms: 100
redis_connections: per_thread
memory_max_keys: 5000
deny_status: 403
trusted_proxies: ["::1/128"]
forwarded_header: forwarded
ipv6_prefix: 48
ipv4_prefix: 24
limits: {max_body_bytes: 1024, max_header_bytes: 2048, idle_timeout_ms: 500, shutdown_timeout_ms: 0,
         request_head_timeout_ms: 250, max_connections: 77}
policies:
  p: {capacity: 3, refill_per_second: 0.5}
rules:
  - {name: r, match: {path_prefix: /x, methods: [get, Post], hosts: [Example.COM]}, key: "ip+path", policy: p, cost: 2}
)",
                              "all.yaml");
  EXPECT_EQ(c.listen_host, "::1");
  EXPECT_EQ(c.listen_port, 9090);
  EXPECT_EQ(c.listen(), "[::1]:9090");
  EXPECT_EQ(c.threads, 3u);
  EXPECT_EQ(c.log_level, "debug");
  EXPECT_EQ(c.backend, "redis://127.0.0.1:6390/2");
  EXPECT_EQ(c.key_prefix, "rl:");
  EXPECT_EQ(c.on_backend_failure, failure_mode::local);
  EXPECT_EQ(c.policies.at("p").on_failure, failure_mode::local);
  EXPECT_EQ(c.backend_timeout, std::chrono::milliseconds{20});
  EXPECT_EQ(c.backend_connect_timeout, std::chrono::milliseconds{100});
  EXPECT_TRUE(c.redis_connection_per_thread);
  EXPECT_EQ(c.memory_max_keys, 5000u);
  EXPECT_EQ(c.deny_status, 403u);
  EXPECT_EQ(c.keys.header, http::forwarded_header::forwarded);
  EXPECT_EQ(c.keys.ipv6_prefix, 48u);
  EXPECT_EQ(c.keys.ipv4_prefix, 24u);
  EXPECT_EQ(c.limits.max_body_bytes, 1024u);
  EXPECT_EQ(c.limits.max_header_bytes, 2048u);
  EXPECT_EQ(c.limits.idle_timeout, std::chrono::milliseconds{500});
  EXPECT_EQ(c.limits.shutdown_timeout, std::chrono::milliseconds{0});
  EXPECT_EQ(c.limits.request_head_timeout, std::chrono::milliseconds{250});
  EXPECT_EQ(c.limits.max_connections, 77u);
  ASSERT_EQ(c.rules.size(), 1u);
  EXPECT_EQ(c.rules[0].match.methods, (std::vector<std::string>{"GET", "POST"}));
  EXPECT_EQ(c.rules[0].match.hosts, std::vector<std::string>{"example.com"});
  EXPECT_EQ(c.rules[0].cost, 2u);
  EXPECT_EQ(c.rules[0].key.alternatives().at(0).size(), 2u);
}

TEST(DaemonConfigTest, DefaultConfigIsTheDocumentedDemo) {
  const auto c = default_config();
  EXPECT_EQ(c.listen(), "127.0.0.1:8080");
  EXPECT_EQ(c.backend, "memory");
  ASSERT_EQ(c.policies.size(), 1u);
  EXPECT_EQ(c.policies.at("default").capacity, 10u);
  EXPECT_DOUBLE_EQ(c.policies.at("default").refill_per_second, 1);
  ASSERT_EQ(c.rules.size(), 1u);
  EXPECT_EQ(c.rules[0].match.path_prefix, "/");
  EXPECT_EQ(c.rules[0].key.to_string(), "ip");
  EXPECT_EQ(c.keys.trusted_proxies.size(), 2u);
  // It is a valid rule set.
  EXPECT_NO_THROW(http::rule_set(c.policies, c.rules, c.keys));
}

TEST(DaemonConfigTest, EveryAlgorithmIsAccepted) {
  const auto c = parse_config(R"(on_backend_failure: closed
policies:
  tb:     { capacity: 100, refill_per_second: 10 }
  g:      { algorithm: gcra, capacity: 5, refill_per_second: 0.5 }
  search: { algorithm: sliding_window, limit: 100, window: 1m }
  swc:    { algorithm: sliding_window_counter, limit: 1000, window: 1h, on_backend_failure: open }
  daily:  { algorithm: fixed_window, limit: 10000, window: 1d }
  ms:     { algorithm: fixed_window, limit: 3, window: 250ms }
  bare:   { algorithm: fixed_window, limit: 3, window: 60000 }
  quoted: { algorithm: sliding_window, limit: 3, window: "30s" }
  year:   { algorithm: sliding_window_counter, limit: 10, window: 366d }
rules:
  - { name: s, match: { path_prefix: /search }, key: ip, policy: search, cost: 100 }
)",
                              "algorithms.yaml");
  using std::chrono::milliseconds;
  const auto& p = c.policies;
  EXPECT_EQ(p.at("tb").algorithm, algorithm::token_bucket);
  EXPECT_EQ(p.at("g").algorithm, algorithm::gcra);
  EXPECT_EQ(p.at("g").capacity, 5u);
  EXPECT_DOUBLE_EQ(p.at("g").refill_per_second, 0.5);
  EXPECT_EQ(p.at("g").limit, 0u);
  const auto& search = p.at("search");
  EXPECT_EQ(search.algorithm, algorithm::sliding_window);
  EXPECT_EQ(search.limit, 100u);
  EXPECT_EQ(search.window, milliseconds(60'000));
  EXPECT_EQ(search.capacity, 0u);  // a window has no bucket parameters
  EXPECT_EQ(search.refill_per_second, 0.0);
  EXPECT_EQ(search.on_failure, failure_mode::closed);  // inherited
  EXPECT_EQ(p.at("swc").algorithm, algorithm::sliding_window_counter);
  EXPECT_EQ(p.at("swc").window, milliseconds(3'600'000));
  EXPECT_EQ(p.at("swc").on_failure, failure_mode::open);  // overridden
  EXPECT_EQ(p.at("daily").algorithm, algorithm::fixed_window);
  EXPECT_EQ(p.at("daily").window, milliseconds(86'400'000));
  EXPECT_EQ(p.at("ms").window, milliseconds(250));
  EXPECT_EQ(p.at("bare").window, milliseconds(60'000));  // an integer is milliseconds
  EXPECT_EQ(p.at("quoted").window, milliseconds(30'000));
  EXPECT_EQ(p.at("year").window, max_window);
  for (const auto& [name, policy] : p) EXPECT_FALSE(validate(policy)) << name;
  EXPECT_EQ(c.rules.at(0).cost, 100u);  // up to the window's limit
  EXPECT_NO_THROW(http::rule_set(c.policies, c.rules, c.keys));
}

// The whole message, as sluiced prints it before exiting 2, for each way a policy's
// algorithm and parameters can disagree.
TEST(DaemonConfigTest, AlgorithmErrorsReadExactly) {
  auto what = [](const std::string& policy_yaml) {
    return std::string(error_of("listen: 127.0.0.1:8080\npolicies:\n  p:\n" + policy_yaml).what());
  };
  EXPECT_EQ(what("    algorithm: leaky_bucket\n    capacity: 5\n    refill_per_second: 1\n"),
            "test.yaml:4: policies.p.algorithm: unknown algorithm \"leaky_bucket\" (want "
            "token_bucket, gcra, sliding_window, sliding_window_counter or fixed_window)");
  EXPECT_EQ(
      what("    algorithm: sliding_window\n    limit: 10\n    window: 1m\n    capacity: 10\n"),
      "test.yaml:7: policies.p.capacity: is for token_bucket and gcra; sliding_window takes "
      "limit and window");
  EXPECT_EQ(what("    algorithm: fixed_window\n    limit: 10\n    window: 1m\n"
                 "    refill_per_second: 1\n"),
            "test.yaml:7: policies.p.refill_per_second: is for token_bucket and gcra; fixed_window "
            "takes limit and window");
  EXPECT_EQ(
      what("    algorithm: gcra\n    capacity: 10\n    refill_per_second: 1\n    limit: 10\n"),
      "test.yaml:7: policies.p.limit: is for sliding_window, sliding_window_counter and "
      "fixed_window; gcra takes capacity and refill_per_second");
  EXPECT_EQ(what("    limit: 10\n    window: 1m\n"),
            "test.yaml:4: policies.p.limit: is for sliding_window, sliding_window_counter and "
            "fixed_window; token_bucket (the default algorithm) takes capacity and "
            "refill_per_second");
  EXPECT_EQ(what("    algorithm: sliding_window_counter\n    window: 1m\n"),
            "test.yaml:4: policies.p.limit: is required for sliding_window_counter");
  EXPECT_EQ(what("    algorithm: sliding_window_counter\n    limit: 10\n"),
            "test.yaml:4: policies.p.window: is required for sliding_window_counter");
  EXPECT_EQ(what("    algorithm: gcra\n    refill_per_second: 1\n"),
            "test.yaml:4: policies.p.capacity: is required for gcra");
  EXPECT_EQ(what("    refill_per_second: 1\n"),
            "test.yaml:4: policies.p.capacity: is required for token_bucket (the default "
            "algorithm)");
  EXPECT_EQ(what("    algorithm: fixed_window\n    limit: 1000000001\n    window: 1m\n"),
            "test.yaml:5: policies.p.limit: must be in 1..1000000000, got 1000000001");
  EXPECT_EQ(what("    algorithm: sliding_window\n    limit: 10001\n    window: 1m\n"),
            "test.yaml:5: policies.p.limit: limit must be 1..1000000000 (sliding_window: "
            "1..10000; sliding_window_counter: limit x window_ms at most 4e15)");
  EXPECT_EQ(what("    algorithm: sliding_window_counter\n    limit: 1000000000\n    window: 1d\n"),
            "test.yaml:5: policies.p.limit: limit must be 1..1000000000 (sliding_window: "
            "1..10000; sliding_window_counter: limit x window_ms at most 4e15)");
  EXPECT_EQ(what("    algorithm: fixed_window\n    limit: 5\n    window: 1m30s\n"),
            "test.yaml:6: policies.p.window: \"1m30s\" is not a duration: want a whole number "
            "and a unit ms, s, m, h or d (e.g. 250ms, 1s, 1m, 1h, 1d), or a whole number of "
            "milliseconds");
  EXPECT_EQ(what("    algorithm: fixed_window\n    limit: 5\n    window: 0s\n"),
            "test.yaml:6: policies.p.window: must be 1ms..366d (1..31622400000 milliseconds), got "
            "0s");
  EXPECT_EQ(what("    algorithm: fixed_window\n    limit: 5\n    window: 0\n"),
            "test.yaml:6: policies.p.window: must be 1ms..366d (1..31622400000 milliseconds), got "
            "0");
  EXPECT_EQ(what("    algorithm: fixed_window\n    limit: 5\n    window: -1000\n"),
            "test.yaml:6: policies.p.window: \"-1000\" is not a duration: want a whole number "
            "and a unit ms, s, m, h or d (e.g. 250ms, 1s, 1m, 1h, 1d), or a whole number of "
            "milliseconds");
  EXPECT_EQ(what("    algorithm: fixed_window\n    limit: 5\n    window: 367d\n"),
            "test.yaml:6: policies.p.window: must be 1ms..366d (1..31622400000 milliseconds), got "
            "367d");
  for (const std::string too_long :
       {"31622400001", "99999999999999999999", "99999999999999999999d"}) {
    EXPECT_EQ(what("    algorithm: fixed_window\n    limit: 5\n    window: " + too_long + "\n"),
              "test.yaml:6: policies.p.window: must be 1ms..366d (1..31622400000 milliseconds), "
              "got " +
                  too_long);
  }
  EXPECT_EQ(what("    algorithm: fixed_window\n    limit: 5\n    window: [1m]\n"),
            "test.yaml:6: policies.p.window: must be a scalar");
}

struct bad_case {
  const char* name;
  std::string yaml;
  int line;
  const char* field;
  const char* message_part;
};

class DaemonConfigErrorTest : public ::testing::TestWithParam<bad_case> {};

TEST_P(DaemonConfigErrorTest, NamesFileLineAndField) {
  const auto& c = GetParam();
  const auto e = error_of(c.yaml);
  EXPECT_EQ(e.file(), "test.yaml");
  EXPECT_EQ(e.line(), c.line) << e.what();
  EXPECT_EQ(e.field(), c.field) << e.what();
  EXPECT_NE(e.message().find(c.message_part), std::string::npos) << e.what();
  // what() is FILE:LINE: field: message
  const std::string expected_prefix =
      "test.yaml:" + std::to_string(c.line) + ": " +
      (std::string(c.field).empty() ? "" : std::string(c.field) + ": ");
  EXPECT_EQ(std::string(e.what()).rfind(expected_prefix, 0), 0u) << e.what();
}

INSTANTIATE_TEST_SUITE_P(
    Fields, DaemonConfigErrorTest,
    ::testing::Values(
        bad_case{"RedisConnectionsNeitherSharedNorPerThread",
                 std::string(one_policy) + "redis_connections: pooled\n", 3, "redis_connections",
                 "shared or per_thread"},
        bad_case{"UnknownTopLevelKey", std::string(one_policy) + "listn: 1.2.3.4:80\n", 3, "listn",
                 "unknown key"},
        bad_case{"ZeroCapacity", "policies:\n  api:\n    capacity: 0\n    refill_per_second: 1\n",
                 3, "policies.api.capacity", "1..1000000000"},
        bad_case{"CapacityNotANumber", "policies:\n  api: {capacity: lots, refill_per_second: 1}\n",
                 2, "policies.api.capacity", "integer"},
        bad_case{"NegativeRefill",
                 "policies:\n\n  api:\n    capacity: 5\n    refill_per_second: -1\n", 5,
                 "policies.api.refill_per_second", "refill"},
        bad_case{"NanRefill", "policies:\n  api: {capacity: 5, refill_per_second: .nan}\n", 2,
                 "policies.api.refill_per_second", "number"},
        bad_case{"MissingRefill", "policies:\n  api: {capacity: 5}\n", 2,
                 "policies.api.refill_per_second", "required"},
        bad_case{"WindowWithCapacity",
                 "policies:\n  s: {algorithm: sliding_window, limit: 9, window: 1m, capacity: 5}\n",
                 2, "policies.s.capacity", "is for token_bucket and gcra"},
        bad_case{"BucketWithWindow",
                 "policies:\n  api:\n    capacity: 5\n    refill_per_second: 1\n    window: 1m\n",
                 5, "policies.api.window", "token_bucket (the default algorithm) takes"},
        bad_case{"WindowMissingLimit", "policies:\n  q: {algorithm: fixed_window, window: 1h}\n", 2,
                 "policies.q.limit", "is required for fixed_window"},
        bad_case{"WindowLimitZero",
                 "policies:\n  q:\n    algorithm: fixed_window\n    limit: 0\n    window: 1h\n", 4,
                 "policies.q.limit", "1..1000000000, got 0"},
        bad_case{"WindowBadDuration",
                 "policies:\n  q:\n    algorithm: fixed_window\n    limit: 5\n    window: 1.5m\n",
                 5, "policies.q.window", "not a duration"},
        bad_case{"GcraRateTooHigh",
                 "policies:\n  g: {algorithm: gcra, capacity: 5, refill_per_second: 2e6}\n", 2,
                 "policies.g.refill_per_second", "gcra"},
        bad_case{"UnknownAlgorithm",
                 "policies:\n  api: {algorithm: leaky, capacity: 5, refill_per_second: 1}\n", 2,
                 "policies.api.algorithm",
                 "unknown algorithm \"leaky\" (want token_bucket, gcra, sliding_window, "
                 "sliding_window_counter or fixed_window)"},
        bad_case{"BadFailureMode", std::string(one_policy) + "on_backend_failure: maybe\n", 3,
                 "on_backend_failure", "open, closed or local"},
        bad_case{
            "BadPolicyFailureMode",
            "policies:\n  api: {capacity: 5, refill_per_second: 1, on_backend_failure: shut}\n", 2,
            "policies.api.on_backend_failure", "open, closed or local"},
        bad_case{"NoPolicies", "listen: 127.0.0.1:8080\n", 1, "policies", "required"},
        bad_case{"EmptyConfig", "", 0, "policies", "empty"},
        bad_case{"RuleUnknownPolicy",
                 std::string(one_policy) + "rules:\n  - {name: a, key: ip, policy: api}\n  - name: "
                                           "b\n    key: ip\n    policy: apx\n",
                 7, "rules[1].policy", "no policy named \"apx\""},
        bad_case{"RuleBadKeySpec",
                 std::string(one_policy) + "rules:\n  - {name: a, key: \"header:\", policy: api}\n",
                 4, "rules[0].key", "header"},
        bad_case{"RuleMissingKey", std::string(one_policy) + "rules:\n  - {name: a, policy: api}\n",
                 4, "rules[0].key", "required"},
        bad_case{"RuleDuplicateName",
                 std::string(one_policy) + "rules:\n  - {name: a, key: ip, policy: api}\n  - "
                                           "{name: a, key: ip, policy: api}\n",
                 5, "rules[1].name", "duplicate"},
        bad_case{"RuleCostOverWindowLimit",
                 "policies:\n  q: {algorithm: fixed_window, limit: 3, window: 1s}\n"
                 "rules:\n  - {name: a, key: ip, policy: q, cost: 4}\n",
                 4, "rules[0].cost", "1..3, got 4"},
        bad_case{
            "RuleCostOverCapacity",
            std::string(one_policy) + "rules:\n  - {name: a, key: ip, policy: api, cost: 11}\n", 4,
            "rules[0].cost", "1..10"},
        bad_case{"RuleUnknownMatchKey",
                 std::string(one_policy) +
                     "rules:\n  - name: a\n    match: {path: /x}\n    key: ip\n    policy: api\n",
                 5, "rules[0].match.path", "unknown key"},
        bad_case{"RulePathWithoutSlash",
                 std::string(one_policy) +
                     "rules:\n  - {name: a, match: {path_prefix: api}, key: ip, policy: api}\n",
                 4, "rules[0].match.path_prefix", "'/'"},
        bad_case{"RuleShadowNotBool",
                 std::string(one_policy) +
                     "rules:\n  - {name: a, key: ip, policy: api, shadow: maybe}\n",
                 4, "rules[0].shadow", "true or false"},
        bad_case{"BadCidr",
                 std::string(one_policy) + "trusted_proxies:\n  - 10.0.0.0/8\n  - 10.0.0.0/33\n", 5,
                 "trusted_proxies[1]", "prefix"},
        bad_case{"DenyStatusNot4xx", std::string(one_policy) + "deny_status: 200\n", 3,
                 "deny_status", "400..499"},
        bad_case{"BadListen", std::string(one_policy) + "listen: localhost\n", 3, "listen",
                 "HOST:PORT"},
        bad_case{"ListenNotAnAddress", std::string(one_policy) + "listen: example.com:80\n", 3,
                 "listen", "not an IP address"},
        bad_case{"BadBackend", std::string(one_policy) + "backend: postgres://x\n", 3, "backend",
                 "memory or a redis://"},
        bad_case{"TimeoutOutOfRange", std::string(one_policy) + "backend_timeout_ms: 0\n", 3,
                 "backend_timeout_ms", "1..60000"},
        bad_case{"Ipv6PrefixOutOfRange", std::string(one_policy) + "ipv6_prefix: 129\n", 3,
                 "ipv6_prefix", "1..128"},
        bad_case{"BadForwardedHeader", std::string(one_policy) + "forwarded_header: x-real-ip\n", 3,
                 "forwarded_header", "x-forwarded-for"},
        bad_case{"BadLogLevel", std::string(one_policy) + "log_level: loud\n", 3, "log_level",
                 "trace"},
        bad_case{"LimitsUnknownKey", std::string(one_policy) + "limits:\n  max_body: 10\n", 4,
                 "limits.max_body", "unknown key"},
        bad_case{"BodyLimitTooSmall", std::string(one_policy) + "limits: {max_body_bytes: 1}\n", 3,
                 "limits.max_body_bytes", "64..1048576"},
        bad_case{"NoConnectionsAllowed", std::string(one_policy) + "limits: {max_connections: 0}\n",
                 3, "limits.max_connections", "1..1000000"},
        bad_case{"HeadTimeoutTooShort",
                 std::string(one_policy) + "limits: {request_head_timeout_ms: 5}\n", 3,
                 "limits.request_head_timeout_ms", "100..3600000"},
        bad_case{"PoliciesNotAMap", "policies: [a, b]\n", 1, "policies", "mapping"},
        bad_case{"InvalidYaml", std::string(one_policy) + "rules: [ {name: a\n", 4, "",
                 "invalid YAML"},
        bad_case{"DuplicateTopLevelKey",
                 std::string(one_policy) + "deny_status: 403\ndeny_status: 401\n", 4, "deny_status",
                 "duplicate key"},
        bad_case{"DuplicatePolicy",
                 "policies:\n  api: {capacity: 1, refill_per_second: 1}\n"
                 "  api: {capacity: 5, refill_per_second: 1}\n",
                 3, "policies.api", "duplicate key"},
        bad_case{"DuplicateKeyInAFlowMap",
                 "policies:\n  api: {capacity: 1, refill_per_second: 1, capacity: 9}\n", 2,
                 "policies.api.capacity", "duplicate key"},
        bad_case{"QuotedNumber", "policies:\n  api: {capacity: 5, refill_per_second: '10'}\n", 2,
                 "policies.api.refill_per_second", "quoted"},
        bad_case{"QuotedInteger", std::string(one_policy) + "deny_status: \"429\"\n", 3,
                 "deny_status", "quoted"},
        bad_case{"ProxyWithSpace", std::string(one_policy) + "trusted_proxies: [' 10.0.0.0/8']\n",
                 3, "trusted_proxies[0]", "spaces"},
        bad_case{"HostWithPort",
                 std::string(one_policy) +
                     "rules:\n  - {name: a, match: {hosts: ['a.com:80']}, key: ip, policy: api}\n",
                 4, "rules[0].match.hosts", "without a port"}),
    [](const ::testing::TestParamInfo<bad_case>& info) { return std::string(info.param.name); });

TEST(DaemonConfigTest, MissingFileIsAConfigError) {
  try {
    load_config_file("/nonexistent/sluiced.yaml");
    FAIL() << "no error";
  } catch (const config_error& e) {
    EXPECT_EQ(std::string(e.what()), "/nonexistent/sluiced.yaml:0: cannot read the file");
  }
}

// The process-level path: an invalid --config ends with exit code 2 and the error on stderr.
class DaemonCommandLineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sluice-daemon-config-XXXXXX";
    int fd = ::mkstemp(tmpl);
    ASSERT_GE(fd, 0);
    ::close(fd);
    path_ = tmpl;
  }
  void TearDown() override { std::remove(path_.c_str()); }
  void write(const std::string& text) {
    std::ofstream out(path_, std::ios::trunc);
    out << text;
  }
  std::optional<int> parse(std::vector<std::string> args) {
    std::vector<const char*> argv{"sluiced"};
    for (auto& a : args) argv.push_back(a.c_str());
    return parse_command_line(static_cast<int>(argv.size()), argv.data(), opts_, out_, err_);
  }
  std::string path_;
  app_options opts_;
  std::ostringstream out_, err_;
};

TEST_F(DaemonCommandLineTest, InvalidConfigExitsTwoWithFileLineField) {
  write(
      "policies:\n  api: {capacity: 10, refill_per_second: 1}\nrules:\n  - {name: a, key: ip, "
      "policy: nope}\n");
  EXPECT_EQ(parse({"--config", path_}), 2);
  EXPECT_EQ(err_.str(), path_ + ":4: rules[0].policy: no policy named \"nope\"\n");
}

TEST_F(DaemonCommandLineTest, AWindowForABucketExitsTwoWithFileLineField) {
  write(
      "policies:\n  search:\n    algorithm: gcra\n    capacity: 10\n    refill_per_second: 1\n"
      "    window: 1m\n");
  EXPECT_EQ(parse({"--config", path_, "--check-config"}), 2);
  EXPECT_EQ(err_.str(), path_ +
                            ":6: policies.search.window: is for sliding_window, "
                            "sliding_window_counter and fixed_window; gcra takes capacity and "
                            "refill_per_second\n");
  write("policies:\n  search: {algorithm: sliding_window, limit: 100, window: 1m}\n");
  err_.str("");
  EXPECT_EQ(parse({"--config", path_, "--check-config"}), 0) << err_.str();
}

TEST_F(DaemonCommandLineTest, ValidConfigRunsWithOverrides) {
  write(one_policy);
  EXPECT_EQ(parse({"--config", path_, "--listen", "127.0.0.1:0", "--threads", "2"}), std::nullopt);
  EXPECT_EQ(opts_.config_path, path_);
  EXPECT_EQ(opts_.cfg.listen(), "127.0.0.1:0");
  EXPECT_EQ(opts_.cfg.threads, 2u);
}

TEST_F(DaemonCommandLineTest, CheckConfigExitsZeroWhenValid) {
  write(one_policy);
  EXPECT_EQ(parse({"--config", path_, "--check-config"}), 0);
  EXPECT_NE(out_.str().find("valid"), std::string::npos);
}

TEST_F(DaemonCommandLineTest, NoConfigMeansTheDefault) {
  EXPECT_EQ(parse({}), std::nullopt);
  EXPECT_TRUE(opts_.config_path.empty());
  EXPECT_EQ(opts_.cfg.listen(), "127.0.0.1:8080");
  EXPECT_EQ(opts_.cfg.policies.count("default"), 1u);
}

TEST_F(DaemonCommandLineTest, UsageErrorsExitTwo) {
  EXPECT_EQ(parse({"--no-such-flag"}), 2);
  EXPECT_EQ(parse({"--listen", "nowhere"}), 2);
  EXPECT_NE(err_.str().find("--listen:0: listen:"), std::string::npos) << err_.str();
  EXPECT_EQ(parse({"--log-level", "loud"}), 2);
}

TEST(DaemonConfigTest, LoggedUrlsHideThePasswords) {
  EXPECT_EQ(redacted_url("redis://127.0.0.1:6379"), "redis://127.0.0.1:6379");
  EXPECT_EQ(redacted_url("redis://:pw@h:1/0"), "redis://:***@h:1/0");
  EXPECT_EQ(redacted_url("redis://alice:s3cret@h"), "redis://alice:***@h");
  // An '@' in the password: the user info ends at the last '@' (found by fuzzing).
  EXPECT_EQ(redacted_url("redis://:p@ss@h:1/0"), "redis://:***@h:1/0");
  EXPECT_EQ(redacted_url("redis+cluster://u:a@b@h1:1,h2:2"), "redis+cluster://u:***@h1:1,h2:2");
  EXPECT_EQ(redacted_url("redis://alice@h"), "redis://alice@h");
  EXPECT_EQ(redacted_url("redis+sentinel://u:p@a:1,b:2/m?sentinel_password=x&db=1"),
            "redis+sentinel://u:***@a:1,b:2/m?sentinel_password=***&db=1");
  EXPECT_EQ(redacted_url("rediss://h?ca=/etc/ca.pem&sentinel_password="),
            "rediss://h?ca=/etc/ca.pem&sentinel_password=***");
}

TEST(DaemonConfigTest, LeaseTtlIsReadAndBounded) {
  const auto c = parse_config(R"(listen: 127.0.0.1:8080
policies:
  hot: { capacity: 1000, refill_per_second: 100, lease_ttl: 50ms }
  off: { capacity: 10, refill_per_second: 1, lease_ttl: 0 }
  plain: { capacity: 10, refill_per_second: 1 }
)",
                              "test.yaml");
  EXPECT_EQ(c.policies.at("hot").lease_ttl, std::chrono::milliseconds{50});
  EXPECT_EQ(c.policies.at("off").lease_ttl, std::chrono::milliseconds{0});
  EXPECT_EQ(c.policies.at("plain").lease_ttl, std::chrono::milliseconds{0});
  auto what = [](const std::string& policy_yaml) {
    return std::string(error_of("listen: 127.0.0.1:8080\npolicies:\n  p:\n" + policy_yaml).what());
  };
  EXPECT_EQ(what("    capacity: 5\n    refill_per_second: 1\n    lease_ttl: 2h\n"),
            "test.yaml:6: policies.p.lease_ttl: must be 1ms..1h (1..3600000 milliseconds), got "
            "2h");
  EXPECT_NE(what("    capacity: 5\n    refill_per_second: 1\n    lease_ttl: soon\n")
                .find("test.yaml:6: policies.p.lease_ttl: \"soon\" is not a duration"),
            std::string::npos);
}

}  // namespace
}  // namespace sluice::daemon

namespace sluice::daemon {
namespace {

// An alias inside its own anchor is an endless tree to yaml-cpp: refused with a line and a
// field instead of overflowing the stack (found by fuzzing; a SIGHUP with it killed sluiced).
TEST(DaemonConfigAliasTest, AnAliasInsideItsOwnAnchorIsRefused) {
  try {
    parse_config("policies:\n  api: {capacity: 1, refill_per_second: 1}\na: &b {c: *b}\n",
                 "alias.yaml");
    FAIL() << "accepted";
  } catch (const config_error& e) {
    EXPECT_EQ(e.file(), "alias.yaml");
    EXPECT_NE(e.message().find("nested too deeply"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace sluice::daemon
