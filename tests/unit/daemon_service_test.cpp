// The daemon's request handling without sockets: service::handle driven on an io_context.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <functional>
#include <optional>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <nlohmann/json.hpp>

#include "app.hpp"
#include "config.hpp"
#include "service.hpp"
#include "support/service_call.hpp"

namespace sluice::daemon {
namespace {

using json = nlohmann::json;

config test_config() {
  return parse_config(R"(trusted_proxies: [10.0.0.1/32]
policies:
  api: {capacity: 2, refill_per_second: 0.001}
rules:
  - {name: login, match: {path_prefix: /login, methods: [POST]}, key: ip, policy: api}
)",
                      "unit.yaml");
}

// The answer's body as the daemon built it before it wrote it by hand: a json object of
// the decision's fields, dumped.
std::string as_nlohmann_dumped_it(const json& parsed) {
  json j;
  j["allowed"] = parsed.at("allowed").get<bool>();
  j["limit"] = parsed.at("limit").get<std::uint64_t>();
  j["remaining"] = parsed.at("remaining").get<std::uint64_t>();
  j["retry_after_ms"] = parsed.at("retry_after_ms").get<std::int64_t>();
  j["reset_after_ms"] = parsed.at("reset_after_ms").get<std::int64_t>();
  j["degraded"] = parsed.at("degraded").get<bool>();
  j["policy"] = parsed.at("policy").get<std::string>();
  return j.dump() + "\n";
}

class DaemonServiceTest : public ::testing::Test {
 protected:
  http_response call(const std::string& method, const std::string& target, const std::string& peer,
                     const test::header_list& headers = {}, const std::string& body = "") {
    return test::call_service(svc_, ioc_, method, target, peer, headers, body);
  }
  http_response check(const std::string& body) {
    return call("POST", "/v1/check", "127.0.0.1", {{"Content-Type", "application/json"}}, body);
  }

  boost::asio::io_context ioc_;
  service svc_{test_config(), {}, test::unit_clock()};
};

TEST_F(DaemonServiceTest, CheckAnswersWithTheDecision) {
  auto r = check(R"({"key":"k","policy":"api"})");
  ASSERT_EQ(r.result_int(), 200u);
  auto j = json::parse(r.body());
  EXPECT_EQ(j["allowed"], true);
  EXPECT_EQ(j["limit"], 2);
  EXPECT_EQ(j["remaining"], 1);
  EXPECT_EQ(j["policy"], "api");
  EXPECT_EQ(j["retry_after_ms"], 0);
  EXPECT_EQ(j["degraded"], false);
  EXPECT_TRUE(j["reset_after_ms"].is_number_integer());
  // The body is written by hand; clients have been reading nlohmann's compact dump of it.
  EXPECT_EQ(r.body(), R"({"allowed":true,"degraded":false,"limit":2,"policy":"api","remaining":1,)"
                      R"("reset_after_ms":1000000,"retry_after_ms":0})"
                      "\n");
  EXPECT_EQ(r["X-RateLimit-Remaining"], "1");
  check(R"({"key":"k","policy":"api"})");
  r = check(R"({"key":"k","policy":"api"})");
  EXPECT_EQ(json::parse(r.body())["allowed"], false);
  EXPECT_EQ(r.body(), as_nlohmann_dumped_it(json::parse(r.body())));
  EXPECT_GT(json::parse(r.body())["retry_after_ms"], 999000);
  EXPECT_EQ(r["Retry-After"], "1000");
}

TEST_F(DaemonServiceTest, ProblemResponsesCarryAStableCode) {
  auto r = check(R"({"key":"k","policy":"nope"})");
  EXPECT_EQ(r.result_int(), 422u);
  EXPECT_EQ(r[boost::beast::http::field::content_type], "application/problem+json");
  auto j = json::parse(r.body());
  EXPECT_EQ(j["type"], "about:blank");
  EXPECT_EQ(j["title"], "Unprocessable Entity");
  EXPECT_EQ(j["status"], 422);
  EXPECT_EQ(j["error"], "unknown_policy");
  EXPECT_EQ(call("GET", "/nowhere", "127.0.0.1").result_int(), 404u);
}

TEST_F(DaemonServiceTest, ForwardedFactsCountOnlyFromATrustedPeer) {
  const std::vector<std::pair<std::string, std::string>> claims{{"X-Forwarded-For", "203.0.113.1"},
                                                                {"X-Forwarded-Method", "POST"},
                                                                {"X-Forwarded-Uri", "/login"}};
  // From the trusted proxy 10.0.0.1: a POST /login by 203.0.113.1; capacity 2.
  EXPECT_EQ(call("GET", "/v1/auth", "10.0.0.1", claims).result_int(), 200u);
  EXPECT_EQ(call("GET", "/v1/auth", "10.0.0.1", claims).result_int(), 200u);
  EXPECT_EQ(call("GET", "/v1/auth", "10.0.0.1", claims).result_int(), 429u);
  // The same claims from an untrusted peer describe a GET /v1/auth: no rule matches.
  auto r = call("GET", "/v1/auth", "192.0.2.9", claims);
  EXPECT_EQ(r.result_int(), 200u);
  EXPECT_EQ(r.count("X-RateLimit-Limit"), 0u);
  // Its own POST /v1/auth/login is limited, keyed by its own address.
  EXPECT_EQ(call("POST", "/v1/auth/login", "192.0.2.9", claims)["X-RateLimit-Remaining"], "1");
}

TEST_F(DaemonServiceTest, AnAbsoluteFormUriMatchesByItsPath) {
  // A trusted proxy may describe the request with an absolute-form URI: the rule for /login
  // still applies (capacity 2), whatever the scheme, authority or case of the scheme.
  const std::vector<std::string> uris{"http://h/login", "HTTPS://h:8443/login?x=1", "/login"};
  std::vector<unsigned> statuses;
  for (const auto& u : uris) {
    statuses.push_back(call("POST", "/v1/auth", "10.0.0.1",
                            {{"X-Forwarded-For", "203.0.113.8"}, {"X-Forwarded-Uri", u}})
                           .result_int());
  }
  EXPECT_EQ(statuses, (std::vector<unsigned>{200, 200, 429}));
}

TEST_F(DaemonServiceTest, ARepeatedMemberIsRefused) {
  const auto r = check(R"({"key":"k","policy":"api","policy":"other"})");
  EXPECT_EQ(r.result_int(), 400u);
  EXPECT_EQ(json::parse(r.body())["error"], "invalid_request");
  EXPECT_EQ(check(R"({"key":"k","policy":"api"})").result_int(), 200u);
}

TEST_F(DaemonServiceTest, ApplyKeepsTheBackendWhenItsSettingsAreUnchanged) {
  const auto before = svc_.current();
  auto c = test_config();
  c.deny_status = 403;
  svc_.apply(c);
  EXPECT_EQ(svc_.current()->lim, before->lim);
  EXPECT_EQ(svc_.current()->cfg.deny_status, 403u);
  c.memory_max_keys = 10;
  svc_.apply(c);
  EXPECT_NE(svc_.current()->lim, before->lim);
}

// A window policy through /v1/check and /v1/auth: its limit is the cost bound (and says so),
// the (limit+1)th request in the window is denied, and the headers speak of the window.
TEST(DaemonServiceWindowTest, CheckAndAuthDenyPastTheWindowsLimit) {
  service svc(parse_config(R"(policies:
  search: {algorithm: sliding_window, limit: 2, window: 1h}
  api: {capacity: 5, refill_per_second: 1}
rules:
  - {name: search, match: {path_prefix: /search}, key: ip, policy: search}
)",
                           "window.yaml"),
              {}, test::unit_clock());
  boost::asio::io_context ioc;
  auto call = [&](const std::string& method, const std::string& target, const std::string& body) {
    http_request req;
    req.method_string(method);
    req.target(target);
    req.version(11);
    req.set("Content-Type", "application/json");
    req.body() = body;
    req.prepare_payload();
    std::optional<http_response> out;
    svc.handle(std::move(req), "192.0.2.1", ioc.get_executor(),
               [&](http_response r) { out = std::move(r); });
    ioc.restart();
    ioc.run();
    EXPECT_TRUE(out.has_value());
    return out ? std::move(*out) : http_response{};
  };
  auto check = [&](const std::string& body) { return call("POST", "/v1/check", body); };

  auto over = check(R"({"key":"k","policy":"search","cost":3})");
  EXPECT_EQ(over.result_int(), 422u);
  auto j = json::parse(over.body());
  EXPECT_EQ(j["error"], "cost_out_of_range");
  EXPECT_EQ(j["detail"], "\"cost\" must be 1..2 (the limit) for policy \"search\"");
  j = json::parse(check(R"({"key":"k","policy":"api","cost":6})").body());
  EXPECT_EQ(j["detail"], "\"cost\" must be 1..5 (the capacity) for policy \"api\"");

  for (int i = 0; i < 2; ++i) {
    auto r = check(R"({"key":"k","policy":"search"})");
    ASSERT_EQ(r.result_int(), 200u);
    j = json::parse(r.body());
    EXPECT_EQ(j["allowed"], true);
    EXPECT_EQ(j["limit"], 2);
    EXPECT_EQ(j["remaining"], 1 - i);
    EXPECT_EQ(r["RateLimit-Policy"], R"("search";q=2;w=3600)");
  }
  auto r = check(R"({"key":"k","policy":"search"})");
  ASSERT_EQ(r.result_int(), 200u);  // the check worked; the answer is a denial
  j = json::parse(r.body());
  EXPECT_EQ(j["allowed"], false);
  EXPECT_EQ(j["remaining"], 0);
  EXPECT_GT(j["retry_after_ms"].get<std::int64_t>(), 3'590'000);
  EXPECT_LE(j["retry_after_ms"].get<std::int64_t>(), 3'600'000);
  EXPECT_EQ(r["Retry-After"], "3600");
  EXPECT_EQ(r["X-RateLimit-Limit"], "2");
  EXPECT_EQ(r["X-RateLimit-Remaining"], "0");

  // Forward-auth: the rule's own buckets (not /v1/check's), same window.
  EXPECT_EQ(call("GET", "/v1/auth/search?q=a", "").result_int(), 200u);
  EXPECT_EQ(call("GET", "/v1/auth/search?q=b", "").result_int(), 200u);
  r = call("GET", "/v1/auth/search?q=c", "");
  EXPECT_EQ(r.result_int(), 429u);
  EXPECT_EQ(r["RateLimit-Policy"], R"("search";q=2;w=3600)");
  EXPECT_EQ(r["RateLimit"], R"("search";r=0;t=3600)");
  EXPECT_EQ(r["Retry-After"], "3600");
  EXPECT_EQ(call("GET", "/v1/auth/other", "").result_int(), 200u);  // no rule
}

TEST(DaemonServiceEndpointTest, RoutesByPath) {
  EXPECT_EQ(service::endpoint_of("/v1/check"), "check");
  EXPECT_EQ(service::endpoint_of("/v1/check?x=1"), "check");
  EXPECT_EQ(service::endpoint_of("/v1/auth"), "auth");
  EXPECT_EQ(service::endpoint_of("/v1/auth/api/x?y"), "auth");
  EXPECT_EQ(service::endpoint_of("/v1/authx"), "other");
  EXPECT_EQ(service::endpoint_of("/metrics"), "metrics");
  EXPECT_EQ(service::endpoint_of("/healthz"), "healthz");
  EXPECT_EQ(service::endpoint_of("/readyz"), "readyz");
  EXPECT_EQ(service::endpoint_of("/"), "other");
}

TEST(DaemonServiceKeysTest, CheckCallersCannotSpendARulesBucket) {
  // A rule may be named like anything /v1/check builds its keys from; the buckets stay apart.
  service svc(parse_config(R"(trusted_proxies: [10.0.0.1/32]
policies:
  login: {capacity: 3, refill_per_second: 0.001}
rules:
  - {name: c, match: {path_prefix: /login}, key: ip, policy: login}
  - {name: check, match: {path_prefix: /login}, key: ip, policy: login}
)",
                           "keys.yaml"),
              {}, test::unit_clock());
  boost::asio::io_context ioc;
  auto run = [&](http_request req, const std::string& peer) {
    req.version(11);
    req.prepare_payload();
    std::optional<http_response> out;
    svc.handle(std::move(req), peer, ioc.get_executor(),
               [&](http_response r) { out = std::move(r); });
    ioc.restart();
    ioc.run();
    return std::move(*out);
  };
  for (const char* key : {"ip=203.0.113.50", "203.0.113.50", "login:ip=203.0.113.50"}) {
    for (int i = 0; i < 3; ++i) {
      http_request req{boost::beast::http::verb::post, "/v1/check", 11};
      req.set(boost::beast::http::field::content_type, "application/json");
      req.body() = json{{"key", key}, {"policy", "login"}}.dump();
      run(std::move(req), "127.0.0.1");
    }
  }
  http_request auth{boost::beast::http::verb::get, "/v1/auth/login", 11};
  auth.set("X-Forwarded-For", "203.0.113.50");
  const auto r = run(std::move(auth), "10.0.0.1");
  EXPECT_EQ(r.result_int(), 200u);
  EXPECT_EQ(r["X-RateLimit-Remaining"], "2");
}

TEST_F(DaemonServiceTest, ContentTypeMayHaveWhitespaceBeforeItsParameters) {
  auto r =
      call("POST", "/v1/check", "127.0.0.1", {{"Content-Type", "application/json ;charset=utf-8"}},
           R"({"key":"k","policy":"api"})");
  EXPECT_EQ(r.result_int(), 200u);
  r = call("POST", "/v1/check", "127.0.0.1", {{"Content-Type", "text/plain"}},
           R"({"key":"k","policy":"api"})");
  EXPECT_EQ(r.result_int(), 415u);
}

TEST_F(DaemonServiceTest, HeadProbesGetTheHeadersWithoutABody) {
  const auto get = call("GET", "/healthz", "127.0.0.1");
  const auto head = call("HEAD", "/healthz", "127.0.0.1");
  EXPECT_EQ(head.result_int(), 200u);
  EXPECT_TRUE(head.body().empty());
  EXPECT_EQ(head[boost::beast::http::field::content_length], std::to_string(get.body().size()));
  EXPECT_EQ(call("HEAD", "/readyz", "127.0.0.1").result_int(), 200u);
  const auto post = call("POST", "/healthz", "127.0.0.1");
  EXPECT_EQ(post.result_int(), 405u);
  EXPECT_EQ(post[boost::beast::http::field::allow], "GET, HEAD");
}

TEST(DaemonServiceReloadTest, MemoryBucketsSurviveATimeoutChange) {
  service svc(parse_config("policies: {api: {capacity: 1, refill_per_second: 0.001}}", "m.yaml"),
              {}, test::unit_clock());
  const auto before = svc.current()->lim;
  auto c = parse_config(
      "backend_timeout_ms: 7\nkey_prefix: \"x:\"\npolicies: {api: {capacity: 1, "
      "refill_per_second: 0.001}}",
      "m.yaml");
  svc.apply(c);
  EXPECT_EQ(svc.current()->lim, before) << "the memory backend has no timeouts or prefix";
}

// A server thread reads its own copy of the runtime (no lock): after a reload, it takes the
// new one (at the refresh the reload posts it, or at its next request), and off the server
// threads current() reads the shared one.
TEST(DaemonServiceReloadTest, AServerThreadsCopyFollowsAReload) {
  boost::asio::io_context worker;
  service svc(parse_config("deny_status: 429\npolicies: {api: {capacity: 1, refill_per_second: 1}}",
                           "r.yaml"),
              {&worker}, test::unit_clock());
  auto on_worker = [&] {
    std::shared_ptr<const runtime> seen;
    boost::asio::post(worker, [&] { seen = svc.current(); });
    worker.restart();
    worker.run();
    return seen;
  };
  const auto first = on_worker();
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first, svc.current());
  EXPECT_EQ(on_worker(), first) << "unchanged: the same copy";
  auto c = parse_config("deny_status: 403\npolicies: {api: {capacity: 1, refill_per_second: 1}}",
                        "r.yaml");
  svc.apply(c);
  // The reload posts the thread a refresh: idle, it lets go of the old runtime all the same.
  worker.restart();
  worker.run();
  EXPECT_EQ(first.use_count(), 1) << "only this test still holds the replaced runtime";
  const auto second = on_worker();
  EXPECT_NE(second, first);
  EXPECT_EQ(second->cfg.deny_status, 403u);
  EXPECT_EQ(second, svc.current());
}

// Reloads while two server threads read the runtime: every read is a whole runtime, one of
// those applied, and once the threads are done each holds the last one (TSan checks the
// copies are touched by their own thread only).
TEST(DaemonServiceReloadTest, ServerThreadsReadWhileReloadsApply) {
  boost::asio::io_context a, b;
  auto config_with = [](unsigned deny_status) {
    return parse_config("deny_status: " + std::to_string(deny_status) +
                            "\npolicies: {api: {capacity: 1, refill_per_second: 1}}",
                        "r.yaml");
  };
  service svc(config_with(400), {&a, &b}, test::unit_clock());
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0};
  auto reader = [&](boost::asio::io_context& io) {
    return std::thread([&] {
      auto guard = boost::asio::make_work_guard(io);
      std::function<void()> read = [&] {
        const auto rt = svc.current();
        if (!rt || rt->cfg.deny_status < 400 || rt->cfg.deny_status > 499) ++bad;
        if (!stop.load()) boost::asio::post(io, read);
      };
      boost::asio::post(io, read);
      while (!stop.load()) io.run_one();
      guard.reset();
      io.run();
    });
  };
  auto ta = reader(a);
  auto tb = reader(b);
  for (unsigned i = 1; i <= 50; ++i) svc.apply(config_with(400 + i));
  stop = true;
  ta.join();
  tb.join();
  EXPECT_EQ(bad.load(), 0);
  // The refreshes the last reload posted have run: each thread's copy is the last runtime.
  std::shared_ptr<const runtime> on_a, on_b;
  boost::asio::post(a, [&] { on_a = svc.current(); });
  boost::asio::post(b, [&] { on_b = svc.current(); });
  a.restart();
  a.run();
  b.restart();
  b.run();
  EXPECT_EQ(on_a->cfg.deny_status, 450u);
  EXPECT_EQ(on_a, on_b);
}

TEST(DaemonServiceReloadTest, ReloadKeepsTheCommandLineOverrides) {
  const auto path = ::testing::TempDir() + "sluiced-reload-overrides.yaml";
  std::ofstream(path) << "log_level: info\nthreads: 3\npolicies: {api: {capacity: 1, "
                         "refill_per_second: 1}}\n";
  const command_line_overrides cli{"127.0.0.1:9999", 1, "warn"};
  auto c = load_config_file(path);
  cli.apply(c);
  service svc(c, {}, test::unit_clock());
  ASSERT_TRUE(svc.reload(path, [&](config& next) { cli.apply(next); }));
  const auto& now = svc.current()->cfg;
  EXPECT_EQ(now.log_level, "warn");
  EXPECT_EQ(now.threads, 1u);
  EXPECT_EQ(now.listen(), "127.0.0.1:9999");
  std::remove(path.c_str());
}

}  // namespace
}  // namespace sluice::daemon

namespace sluice::daemon {
namespace {

// Issue 16's reproducer: a target that is not UTF-8 reached a problem body, whose JSON
// writer threw, and nothing caught it.
TEST_F(DaemonServiceTest, ATargetThatIsNotUtf8GetsAValidProblemBody) {
  auto r = call("GET", "/\xff/\xc0\xaf", "127.0.0.1");
  ASSERT_EQ(r.result_int(), 404u);
  EXPECT_EQ(r[boost::beast::http::field::content_type], "application/problem+json");
  const auto j = json::parse(r.body());  // throws on invalid UTF-8
  EXPECT_EQ(j["status"], 404);
  EXPECT_EQ(j["detail"], "no such endpoint: /\xef\xbf\xbd/\xef\xbf\xbd\xef\xbf\xbd");
}

TEST_F(DaemonServiceTest, ForwardedFactsThatAreNotUtf8AreAnswered) {
  for (const auto* peer : {"10.0.0.1", "127.0.0.1"}) {
    auto r = call("POST", "/v1/auth/login\xfe", peer,
                  {{"X-Forwarded-For", "203.0.113.\xff, \x01"},
                   {"X-Forwarded-Uri", "/login\xff\x80?a=\xc3"},
                   {"X-Forwarded-Method", "P\xffST"},
                   {"Forwarded", "for=\"\xff\""}});
    EXPECT_TRUE(r.result_int() == 200u || r.result_int() == 429u) << r.result_int();
  }
  EXPECT_EQ(call("GET", "/healthz", "127.0.0.1").result_int(), 200u);
}

TEST_F(DaemonServiceTest, EachRequestIsCountedOnce) {
  call("GET", "/\xff", "127.0.0.1");
  call("GET", "/healthz", "127.0.0.1");
  const auto text = call("GET", "/metrics", "127.0.0.1").body();
  EXPECT_NE(text.find(R"(sluice_http_requests_total{code="404",endpoint="other"} 1)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(R"(sluice_internal_errors_total{where="request"} 0)"), std::string::npos);
}

}  // namespace
}  // namespace sluice::daemon

namespace sluice::daemon {
namespace {

// The answer carries the version sluiced speaks, not the one a client claimed.
TEST_F(DaemonServiceTest, AnUnknownHttpVersionGets505AsHttp11) {
  http_request req{boost::beast::http::verb::get, "/healthz", 99};
  std::optional<http_response> out;
  svc_.handle(std::move(req), "127.0.0.1", ioc_.get_executor(),
              [&](http_response r) { out = std::move(r); });
  ASSERT_TRUE(out);
  EXPECT_EQ(out->result_int(), 505u);
  EXPECT_EQ(out->version(), 11u);
  EXPECT_EQ(json::parse(out->body())["error"], "http_version_not_supported");
}

}  // namespace
}  // namespace sluice::daemon
