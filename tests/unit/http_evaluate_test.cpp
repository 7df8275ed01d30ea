// Rules and evaluation: matching, validation, all-must-allow, shadow rules and the binding
// rule, on a memory backend driven by a manual clock so every number is exact.
#include <gtest/gtest.h>

#include <future>
#include <thread>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/io_context.hpp>

#include <sluice/clock.hpp>
#include <sluice/http/evaluate.hpp>
#include <sluice/http/headers.hpp>
#include <sluice/memory_backend.hpp>

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

policy window(algorithm a, std::uint64_t limit, std::chrono::milliseconds length) {
  policy p;
  p.algorithm = a;
  p.limit = limit;
  p.window = length;
  return p;
}

rule make_rule(std::string name, std::string prefix, std::string key, std::string pol,
               bool shadow = false, std::vector<std::string> methods = {}) {
  rule r;
  r.name = std::move(name);
  r.match.path_prefix = std::move(prefix);
  r.match.methods = std::move(methods);
  r.key = *key_spec::parse(key);
  r.policy = std::move(pol);
  r.shadow = shadow;
  return r;
}

// The rule set of the daemon's example config.
std::shared_ptr<const rule_set> example_rules() {
  key_options o;
  o.trusted_proxies = {*parse_cidr("127.0.0.1/32"), *parse_cidr("10.0.0.0/8")};
  return std::make_shared<const rule_set>(
      std::map<std::string, policy, std::less<>>{{"api", bucket(100, 10)},
                                                 {"login", bucket(5, 0.1)}},
      std::vector<rule>{make_rule("login", "/login", "ip", "login", false, {"POST"}),
                        make_rule("api", "/api", "header:X-API-Key", "api"),
                        make_rule("default", "/", "ip", "api", true)},
      o);
}

struct fixture {
  std::shared_ptr<manual_clock> clock = std::make_shared<manual_clock>();
  limiter lim{[this] {
    memory_options o;
    o.time_source = clock;
    return make_memory_backend(o);
  }()};
  header_map headers;
  request_facts req(std::string method, std::string path, std::string peer = "198.51.100.7") {
    request_facts f{std::move(peer), std::move(method), std::move(path), "example.com", {}};
    f.headers = headers.lookup();
    return f;
  }
};

TEST(HttpRulesTest, MatchesPathMethodAndHost) {
  rule_match m;
  m.path_prefix = "/api";
  request_facts f{"198.51.100.7", "get", "/api/x?y=1", "Example.COM:8080", {}};
  EXPECT_TRUE(m.matches(f));
  f.path = "/apix";
  EXPECT_TRUE(m.matches(f));  // plain string prefix
  f.path = "/ap";
  EXPECT_FALSE(m.matches(f));
  f.path = "/x?/api";
  EXPECT_FALSE(m.matches(f));
  // Spellings of the same resource cannot slip past the rule.
  for (const char* p :
       {"//api/x", "/./api", "/x/../api", "/%61pi", "/%61%70%69/x", "http://h/api"}) {
    f.path = p;
    EXPECT_TRUE(m.matches(f)) << p;
  }
  f.path = "/api";
  m.methods = {"POST", "GET"};
  EXPECT_TRUE(m.matches(f));
  f.method = "DELETE";
  EXPECT_FALSE(m.matches(f));
  f.method = "GET";
  m.hosts = {"example.com"};
  EXPECT_TRUE(m.matches(f));
  f.host = "other.example.com";
  EXPECT_FALSE(m.matches(f));
  m.hosts = {"[::1]"};
  f.host = "[::1]:8080";
  EXPECT_TRUE(m.matches(f));
}

TEST(HttpRulesTest, NormalizesPaths) {
  EXPECT_EQ(normalize_path(""), "/");
  EXPECT_EQ(normalize_path("/"), "/");
  EXPECT_EQ(normalize_path("/api"), "/api");
  EXPECT_EQ(normalize_path("/api/"), "/api/");
  EXPECT_EQ(normalize_path("/api?x=/../y#f"), "/api");
  EXPECT_EQ(normalize_path("//api///v1//"), "/api/v1/");
  EXPECT_EQ(normalize_path("/a/./b/../c"), "/a/c");
  EXPECT_EQ(normalize_path("/a/."), "/a/");
  EXPECT_EQ(normalize_path("/a/b/.."), "/a/");
  EXPECT_EQ(normalize_path("/../../etc"), "/etc");
  EXPECT_EQ(normalize_path("/%6C%6fgin"), "/login");
  EXPECT_EQ(normalize_path("/a%2fb%2F%zz%4"), "/a%2Fb%2F%25zz%254");
  EXPECT_EQ(normalize_path("/%2e%2E/x"), "/x");  // encoded dots are dots
  EXPECT_EQ(normalize_path("http://example.com:8080/api/x?y"), "/api/x");
  EXPECT_EQ(normalize_path("https://example.com"), "/");
  EXPECT_EQ(normalize_path("*"), "/*");
  EXPECT_EQ(normalize_path("api"), "/api");
  EXPECT_EQ(normalize_path("/a://b"), "/a:/b");
}

TEST(HttpRulesTest, ValidationNamesTheCulprit) {
  auto error = [](std::map<std::string, policy, std::less<>> ps, std::vector<rule> rs,
                  key_options o = {}) -> std::string {
    try {
      rule_set set(std::move(ps), std::move(rs), std::move(o));
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "<valid>";
  };
  const std::map<std::string, policy, std::less<>> ok{{"api", bucket(10, 1)}};
  EXPECT_EQ(error(ok, {make_rule("a", "/", "ip", "apx")}), "rule \"a\": unknown policy \"apx\"");
  EXPECT_EQ(error(ok, {make_rule("a", "/", "ip", "api"), make_rule("a", "/x", "ip", "api")}),
            "duplicate rule name \"a\"");
  EXPECT_EQ(error(ok, {make_rule("a b", "/", "ip", "api")}),
            "rule \"a b\": a name is 1..64 characters of A-Z a-z 0-9 _ . -");
  EXPECT_EQ(error(ok, {make_rule("a", "api", "ip", "api")}),
            "rule \"a\": path_prefix must start with '/', not \"api\"");
  auto costly = make_rule("a", "/", "ip", "api");
  costly.cost = 11;
  EXPECT_EQ(error(ok, {costly}), "rule \"a\": cost 11 exceeds the capacity 10 of policy \"api\"");
  costly.cost = 0;
  EXPECT_EQ(error(ok, {costly}), "rule \"a\": cost must be at least 1");
  EXPECT_EQ(error(ok, {make_rule("a", "/", "ip", "api", false, {"GE T"})}),
            "rule \"a\": method \"GE T\" is not a valid method");
  EXPECT_EQ(error({{"api", bucket(0, 1)}}, {}), "policy \"api\": capacity must be 1..1000000000");
  EXPECT_EQ(error({{"api", bucket(1, 0)}}, {}),
            "policy \"api\": refill_per_second must be a finite number in 0.001..1e9");
  EXPECT_EQ(error({{"a:b", bucket(1, 1)}}, {}),
            "policy \"a:b\": a name is 1..64 characters of A-Z a-z 0-9 _ . -");
  key_options bad;
  bad.ipv6_prefix = 0;
  EXPECT_EQ(error(ok, {}, bad), "key_options: ipv6_prefix must be 1..128, not 0");
  bad.ipv6_prefix = 64;
  bad.ipv4_prefix = 33;
  EXPECT_EQ(error(ok, {}, bad), "key_options: ipv4_prefix must be 1..32, not 33");
  EXPECT_EQ(error(ok, {make_rule("a", "/x/../y", "ip", "api")}),
            "rule \"a\": path_prefix \"/x/../y\" is not a normalized path (\"/y\" would match)");
  EXPECT_EQ(error(ok, {make_rule("a", "/", "ip", "api")}), "<valid>");
}

// A window's limit bounds a rule's cost as a bucket's capacity does, and a window with a
// bucket's parameters is refused.
TEST(HttpRulesTest, WindowPoliciesBoundTheCostByTheirLimit) {
  auto error = [](std::map<std::string, policy, std::less<>> ps,
                  std::vector<rule> rs) -> std::string {
    try {
      rule_set set(std::move(ps), std::move(rs));
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "<valid>";
  };
  for (const auto a :
       {algorithm::sliding_window, algorithm::sliding_window_counter, algorithm::fixed_window}) {
    SCOPED_TRACE(std::string(to_string(a)));
    const std::map<std::string, policy, std::less<>> q{{"q", window(a, 3, seconds(1))}};
    auto r = make_rule("a", "/", "ip", "q");
    r.cost = 3;
    EXPECT_EQ(error(q, {r}), "<valid>");
    r.cost = 4;
    EXPECT_EQ(error(q, {r}), "rule \"a\": cost 4 exceeds the limit 3 of policy \"q\"");
  }
  auto gcra = bucket(10, 1);
  gcra.algorithm = algorithm::gcra;
  auto r = make_rule("a", "/", "ip", "g");
  r.cost = 11;
  EXPECT_EQ(error({{"g", gcra}}, {r}),
            "rule \"a\": cost 11 exceeds the capacity 10 of policy \"g\"");
  auto mixed = window(algorithm::fixed_window, 3, seconds(1));
  mixed.capacity = 3;
  EXPECT_EQ(error({{"q", mixed}}, {}),
            "policy \"q\": token_bucket and gcra take capacity and refill_per_second; "
            "sliding_window, sliding_window_counter and fixed_window take limit and window");
  EXPECT_EQ(error({{"q", window(algorithm::fixed_window, 3, milliseconds(0))}}, {}),
            "policy \"q\": window must be 1 ms..366 days");
}

// Forward-auth over a sliding window: `limit` in any `window`, exactly, and the answer's
// headers speak of the window (q = limit, w = its length in seconds).
TEST(HttpEvaluateTest, SlidingWindowDeniesTheRequestPastItsLimit) {
  fixture fx;
  auto rules = std::make_shared<const rule_set>(
      std::map<std::string, policy, std::less<>>{
          {"search", window(algorithm::sliding_window, 3, seconds(10))}},
      std::vector<rule>{make_rule("search", "/search", "ip", "search")});
  for (int i = 1; i <= 3; ++i) {
    const auto e = evaluate(fx.lim, rules, fx.req("GET", "/search"));
    ASSERT_TRUE(e.allowed) << i;
    EXPECT_EQ(e.binding_outcome()->result.limit, 3u);
    EXPECT_EQ(e.binding_outcome()->result.remaining, std::uint64_t(3 - i));
    fx.clock->advance(seconds(1));
  }
  // Three in the last 10 s (at 0, 1 and 2 s): the fourth waits for the first to leave.
  const auto denied = evaluate(fx.lim, rules, fx.req("GET", "/search"));
  EXPECT_FALSE(denied.allowed);
  const auto& d = denied.binding_outcome()->result;
  EXPECT_EQ(d.remaining, 0u);
  EXPECT_EQ(d.retry_after, seconds(7));
  const auto res = make_response(denied);
  EXPECT_EQ(res.status, 429u);
  const std::vector<header_field> want{
      {"X-RateLimit-Limit", "3"},
      {"X-RateLimit-Remaining", "0"},
      {"X-RateLimit-Reset", "9"},  // the last entry leaves 10 s after it came, at 12 s
      {"RateLimit-Policy", "\"search\";q=3;w=10"},
      {"RateLimit", "\"search\";r=0;t=7"},
      {"Retry-After", "7"},
  };
  EXPECT_EQ(res.headers, want);
  fx.clock->advance(milliseconds(6'999));
  EXPECT_FALSE(evaluate(fx.lim, rules, fx.req("GET", "/search")).allowed);
  fx.clock->advance(milliseconds(1));
  EXPECT_TRUE(evaluate(fx.lim, rules, fx.req("GET", "/search")).allowed);
  EXPECT_FALSE(evaluate(fx.lim, rules, fx.req("GET", "/search")).allowed);
}

TEST(HttpEvaluateTest, LoginRuleDeniesTheSixthAttemptShadowRuleNeverDenies) {
  fixture fx;
  const auto rules = example_rules();
  for (int i = 1; i <= 5; ++i) {
    const auto e = evaluate(fx.lim, rules, fx.req("POST", "/login"));
    ASSERT_TRUE(e.allowed) << i;
    ASSERT_EQ(e.outcomes.size(), 2u);  // login and the shadow default
    EXPECT_EQ(e.outcomes[0].rule, "login");
    EXPECT_EQ(e.outcomes[0].key, "login:login:ip=198.51.100.7");
    EXPECT_EQ(e.outcomes[1].key, "default:api:ip=198.51.100.7");
    EXPECT_TRUE(e.outcomes[1].shadow);
    ASSERT_EQ(e.binding, 0u);
    EXPECT_EQ(e.outcomes[0].result.remaining, std::uint64_t(5 - i));
    EXPECT_EQ(e.outcomes[1].result.remaining, std::uint64_t(100 - i));
  }
  const auto denied = evaluate(fx.lim, rules, fx.req("POST", "/login"));
  EXPECT_FALSE(denied.allowed);
  ASSERT_EQ(denied.binding, 0u);
  const auto& d = denied.binding_outcome()->result;
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.limit, 5u);
  EXPECT_EQ(d.remaining, 0u);
  EXPECT_EQ(d.retry_after, milliseconds(10'000));  // one token at 0.1/s
  EXPECT_EQ(d.reset_after, milliseconds(50'000));
  EXPECT_EQ(denied.binding_policy()->capacity, 5u);
  EXPECT_TRUE(denied.outcomes[1].result.allowed);  // the shadow rule still spent

  // Another client is unaffected; GET /login is not the login rule.
  EXPECT_TRUE(evaluate(fx.lim, rules, fx.req("POST", "/login", "198.51.100.8")).allowed);
  const auto get = evaluate(fx.lim, rules, fx.req("GET", "/login"));
  EXPECT_TRUE(get.allowed);
  ASSERT_EQ(get.outcomes.size(), 1u);
  EXPECT_EQ(get.binding, std::nullopt);  // only a shadow rule: no headers

  fx.clock->advance(milliseconds(9'999));
  EXPECT_FALSE(evaluate(fx.lim, rules, fx.req("POST", "/login")).allowed);
  fx.clock->advance(milliseconds(1));
  EXPECT_TRUE(evaluate(fx.lim, rules, fx.req("POST", "/login")).allowed);
}

TEST(HttpEvaluateTest, ShadowDenialIsReportedButAllowed) {
  fixture fx;
  auto rules = std::make_shared<const rule_set>(
      std::map<std::string, policy, std::less<>>{{"tiny", bucket(1, 1)}},
      std::vector<rule>{make_rule("trial", "/", "ip", "tiny", true)});
  EXPECT_TRUE(evaluate(fx.lim, rules, fx.req("GET", "/")).allowed);
  const auto e = evaluate(fx.lim, rules, fx.req("GET", "/"));
  EXPECT_TRUE(e.allowed);
  ASSERT_EQ(e.outcomes.size(), 1u);
  EXPECT_FALSE(e.outcomes[0].result.allowed);
  EXPECT_EQ(e.outcomes[0].result.retry_after, milliseconds(1000));
  EXPECT_EQ(e.binding, std::nullopt);
}

TEST(HttpEvaluateTest, EveryNonShadowRuleMustAllowAndTheTightestBinds) {
  fixture fx;
  auto rules = std::make_shared<const rule_set>(
      std::map<std::string, policy, std::less<>>{{"wide", bucket(10, 1)}, {"narrow", bucket(3, 1)}},
      std::vector<rule>{make_rule("per-ip", "/", "ip", "wide"),
                        make_rule("per-path", "/api", "ip+path", "narrow"),
                        make_rule("same-policy", "/api", "ip", "wide")});
  for (std::uint64_t i = 1; i <= 3; ++i) {
    const auto e = evaluate(fx.lim, rules, fx.req("GET", "/api/x"));
    ASSERT_TRUE(e.allowed);
    ASSERT_EQ(e.outcomes.size(), 3u);
    EXPECT_EQ(e.binding, 1u);  // narrow has the fewest remaining
    EXPECT_EQ(e.outcomes[1].result.remaining, 3 - i);
    // Two rules with the same policy and key still have separate buckets.
    EXPECT_EQ(e.outcomes[0].result.remaining, 10 - i);
    EXPECT_EQ(e.outcomes[2].result.remaining, 10 - i);
    EXPECT_NE(e.outcomes[0].key, e.outcomes[2].key);
  }
  const auto e = evaluate(fx.lim, rules, fx.req("GET", "/api/x"));
  EXPECT_FALSE(e.allowed);
  EXPECT_EQ(e.binding, 1u);
  // All or nothing: the rules that would have allowed spent nothing.
  EXPECT_TRUE(e.outcomes[0].result.allowed);
  EXPECT_EQ(e.outcomes[0].result.remaining, 7u);
  EXPECT_EQ(e.outcomes[2].result.remaining, 7u);
  // A different path has its own narrow bucket; per-ip still had 7.
  const auto other = evaluate(fx.lim, rules, fx.req("GET", "/api/y"));
  EXPECT_TRUE(other.allowed);
  EXPECT_EQ(other.outcomes[0].result.remaining, 6u);
}

TEST(HttpEvaluateTest, SecondRuleDeniesFirstRulesBucketUntouched) {
  fixture fx;
  auto rules = std::make_shared<const rule_set>(
      std::map<std::string, policy, std::less<>>{
          {"big", bucket(10, 1)}, {"tiny", bucket(2, 1)}, {"watch", bucket(100, 1)}},
      std::vector<rule>{make_rule("first", "/", "ip", "big"),
                        make_rule("second", "/x", "ip", "tiny"),
                        make_rule("shadow", "/", "ip", "watch", true)});
  // Two requests only the first rule matches; then /x, which both match, until tiny is empty.
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(evaluate(fx.lim, rules, fx.req("GET", "/")).allowed);
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(evaluate(fx.lim, rules, fx.req("GET", "/x")).allowed);
  for (int i = 0; i < 5; ++i) {
    const auto e = evaluate(fx.lim, rules, fx.req("GET", "/x"));
    ASSERT_FALSE(e.allowed);
    ASSERT_EQ(e.outcomes.size(), 3u);
    EXPECT_EQ(e.binding, 1u);
    EXPECT_FALSE(e.outcomes[1].result.allowed);
    EXPECT_EQ(e.outcomes[1].result.retry_after, milliseconds(1000));
    EXPECT_TRUE(e.outcomes[0].result.allowed);
    EXPECT_EQ(e.outcomes[0].result.remaining, 6u);  // 10 - 4, denials spent nothing
    // The shadow rule decides on its own: it spends on denied requests too.
    EXPECT_EQ(e.outcomes[2].result.remaining, std::uint64_t(100 - 5 - i));
  }
  // The first rule's bucket holds exactly 6: six requests to / pass, the seventh does not.
  for (int i = 0; i < 6; ++i) EXPECT_TRUE(evaluate(fx.lim, rules, fx.req("GET", "/")).allowed) << i;
  EXPECT_FALSE(evaluate(fx.lim, rules, fx.req("GET", "/")).allowed);

  // The asynchronous evaluation is all-or-nothing too.
  fx.clock->advance(seconds(100));  // everything full again
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(evaluate(fx.lim, rules, fx.req("GET", "/x")).allowed);
  std::promise<evaluation> p;
  async_evaluate(fx.lim, rules, fx.req("GET", "/x"),
                 [&p](evaluation e) { p.set_value(std::move(e)); });
  const auto e = p.get_future().get();
  EXPECT_FALSE(e.allowed);
  EXPECT_EQ(e.outcomes[0].result.remaining, 8u);
}

TEST(HttpEvaluateTest, LongestWaitBindsAmongDenials) {
  fixture fx;
  auto rules = std::make_shared<const rule_set>(
      std::map<std::string, policy, std::less<>>{{"fast", bucket(1, 1)}, {"slow", bucket(1, 0.5)}},
      std::vector<rule>{make_rule("a", "/", "ip", "fast"), make_rule("b", "/", "ip", "slow")});
  EXPECT_TRUE(evaluate(fx.lim, rules, fx.req("GET", "/")).allowed);
  const auto e = evaluate(fx.lim, rules, fx.req("GET", "/"));
  EXPECT_FALSE(e.allowed);
  EXPECT_EQ(e.binding, 1u);
  EXPECT_EQ(e.binding_outcome()->result.retry_after, milliseconds(2000));
}

TEST(HttpEvaluateTest, MissingKeySkipsTheRule) {
  fixture fx;
  const auto rules = example_rules();
  const auto e = evaluate(fx.lim, rules, fx.req("GET", "/api/items"));
  EXPECT_TRUE(e.allowed);
  ASSERT_EQ(e.outcomes.size(), 2u);
  EXPECT_TRUE(e.outcomes[0].skipped);
  EXPECT_TRUE(e.outcomes[0].key.empty());
  EXPECT_EQ(e.binding, std::nullopt);

  fx.headers.set("X-API-Key", "k1");
  const auto keyed = evaluate(fx.lim, rules, fx.req("GET", "/api/items"));
  EXPECT_FALSE(keyed.outcomes[0].skipped);
  EXPECT_EQ(keyed.outcomes[0].key, "api:api:h:x-api-key=k1");
  EXPECT_EQ(keyed.binding, 0u);
  EXPECT_EQ(keyed.outcomes[0].result.remaining, 99u);
}

TEST(HttpEvaluateTest, TrustedProxyForwardsTheClient) {
  fixture fx;
  const auto rules = example_rules();
  fx.headers.set("X-Forwarded-For", "203.0.113.5");
  auto e = evaluate(fx.lim, rules, fx.req("GET", "/", "127.0.0.1"));
  EXPECT_EQ(e.outcomes[0].key, "default:api:ip=203.0.113.5");
  e = evaluate(fx.lim, rules, fx.req("GET", "/", "198.51.100.7"));
  EXPECT_EQ(e.outcomes[0].key, "default:api:ip=198.51.100.7");
}

TEST(HttpEvaluateTest, NoMatchingRuleAllows) {
  fixture fx;
  auto rules = std::make_shared<const rule_set>(
      std::map<std::string, policy, std::less<>>{{"p", bucket(1, 1)}},
      std::vector<rule>{make_rule("a", "/only", "ip", "p")});
  const auto e = evaluate(fx.lim, rules, fx.req("GET", "/"));
  EXPECT_TRUE(e.allowed);
  EXPECT_TRUE(e.outcomes.empty());
  EXPECT_EQ(e.binding_outcome(), nullptr);
  EXPECT_FALSE(e.degraded());
  EXPECT_TRUE(evaluate(fx.lim, nullptr, fx.req("GET", "/")).allowed);
}

TEST(HttpEvaluateTest, AsyncEvaluateMatchesTheBlockingOne) {
  fixture fx;
  const auto rules = example_rules();
  auto run = [&](request_facts f) {
    std::promise<evaluation> p;
    auto fut = p.get_future();
    async_evaluate(fx.lim, rules, f, [&p](evaluation e) { p.set_value(std::move(e)); });
    return fut.get();
  };
  for (int i = 1; i <= 5; ++i) {
    const auto e = run(fx.req("POST", "/login"));
    ASSERT_TRUE(e.allowed);
    EXPECT_EQ(e.binding, 0u);
    EXPECT_EQ(e.outcomes[0].result.remaining, std::uint64_t(5 - i));
    EXPECT_EQ(e.outcomes[1].result.remaining, std::uint64_t(100 - i));
  }
  const auto denied = run(fx.req("POST", "/login"));
  EXPECT_FALSE(denied.allowed);
  EXPECT_EQ(denied.binding_outcome()->result.retry_after, milliseconds(10'000));
  // No rule to check: still completes (and not inline).
  const auto none = run(fx.req("GET", "/api"));
  EXPECT_TRUE(none.allowed);
  EXPECT_TRUE(none.outcomes[0].skipped);
}

TEST(HttpEvaluateTest, ConcurrentAsyncEvaluationsAdmitExactlyTheCapacity) {
  fixture fx;  // the clock never moves: no refill
  auto rules = std::make_shared<const rule_set>(
      std::map<std::string, policy, std::less<>>{{"p", bucket(50, 1)}, {"q", bucket(80, 1)}},
      std::vector<rule>{make_rule("a", "/", "ip", "p"), make_rule("b", "/", "ip", "q"),
                        make_rule("s", "/", "ip", "p", true)});
  constexpr int n = 200;
  std::vector<std::promise<evaluation>> promises(n);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = t; i < n; i += 4) {
        async_evaluate(fx.lim, rules, fx.req("GET", "/x"),
                       [&promises, i](evaluation e) { promises[i].set_value(std::move(e)); });
      }
    });
  }
  for (auto& th : threads) th.join();
  // A request is allowed exactly when both of its non-shadow rules allowed it.
  int allowed = 0, a_allowed = 0, b_allowed = 0, s_allowed = 0;
  for (auto& p : promises) {
    const auto e = p.get_future().get();
    ASSERT_EQ(e.outcomes.size(), 3u);
    const auto& a = e.outcomes[0].result;
    const auto& b = e.outcomes[1].result;
    a_allowed += a.allowed;
    b_allowed += b.allowed;
    s_allowed += e.outcomes[2].result.allowed;
    EXPECT_EQ(e.allowed, a.allowed && b.allowed);
    allowed += e.allowed;
    ASSERT_TRUE(e.binding);
    if (!a.allowed) {
      EXPECT_EQ(*e.binding, 0u);  // same retry_after as b: the first denial binds
    } else if (!b.allowed) {
      EXPECT_EQ(*e.binding, 1u);
    } else {
      EXPECT_EQ(*e.binding, b.remaining < a.remaining ? 1u : 0u);
    }
  }
  // All or nothing: a (the smaller) admits exactly 50 requests, b spends only for those,
  // and b's outcomes say it would have allowed every request.
  EXPECT_EQ(a_allowed, 50);
  EXPECT_EQ(allowed, 50);
  EXPECT_EQ(b_allowed, n);
  EXPECT_EQ(s_allowed, 50);
  const auto last = evaluate(fx.lim, rules, fx.req("GET", "/x"));
  EXPECT_EQ(last.outcomes[1].result.remaining, 30u);
}

TEST(HttpEvaluateTest, AsyncHandlerRunsOnItsExecutorNeverInline) {
  fixture fx;
  boost::asio::io_context io;
  bool ran = false;
  async_evaluate(fx.lim, example_rules(), fx.req("POST", "/login"),
                 boost::asio::bind_executor(io, [&](evaluation e) {
                   ran = true;
                   EXPECT_TRUE(e.allowed);
                 }));
  EXPECT_FALSE(ran);
  io.run();  // returns once the posted handler has run
  EXPECT_TRUE(ran);
}

}  // namespace
}  // namespace sluice::http
