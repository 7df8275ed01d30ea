// POST /v1/peek and the admin endpoints (/v1/reset, /v1/refund, /v1/penalize, /v1/block)
// without sockets: request bytes into service::handle, the response out, on the memory
// backend; the token file in the config; the bearer header and the constant-time compare.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>
#include <boost/asio/io_context.hpp>
#include <nlohmann/json.hpp>

#include "admin.hpp"
#include "app.hpp"
#include "config.hpp"
#include "service.hpp"
#include "support/service_call.hpp"

namespace sluice::daemon {
namespace {

using json = nlohmann::json;
using headers = test::header_list;

constexpr const char* token = "s3cr3t-admin-token-0123456789";

// A file in the test's temporary directory, removed at the end of the scope. ctest runs
// each test in a process of its own, several at once: the name carries the process id and a
// counter so that no two tests share a file.
class temp_file {
 public:
  temp_file(const std::string& name, const std::string& text)
      : path_(::testing::TempDir() + "sluice-admin-" + std::to_string(::getpid()) + "-" +
              std::to_string(next_id()++) + "-" + name) {
    std::ofstream(path_, std::ios::binary | std::ios::trunc) << text;
  }
  ~temp_file() { std::remove(path_.c_str()); }
  temp_file(const temp_file&) = delete;
  temp_file& operator=(const temp_file&) = delete;
  const std::string& path() const { return path_; }
  void write(const std::string& text) const {
    std::ofstream(path_, std::ios::binary | std::ios::trunc) << text;
  }

 private:
  static int& next_id() {
    static int id = 0;
    return id;
  }
  std::string path_;
};

std::string policies_yaml() {
  return R"(policies:
  api: {capacity: 2, refill_per_second: 0.001}
  search: {algorithm: sliding_window, limit: 3, window: 1h}
)";
}

// Every log line the service writes while one of these lives.
class log_capture {
 public:
  log_capture() : sink_(std::make_shared<sink>()), previous_(spdlog::default_logger()) {
    auto logger = std::make_shared<spdlog::logger>("capture", sink_);
    logger->set_level(spdlog::level::trace);
    spdlog::set_default_logger(logger);
  }
  ~log_capture() { spdlog::set_default_logger(previous_); }
  std::vector<std::string> lines() const {
    std::lock_guard lock(sink_->lines_mu);
    return sink_->lines;
  }
  std::vector<std::string> lines_with(const std::string& needle) const {
    std::vector<std::string> out;
    for (auto& l : lines()) {
      if (l.find(needle) != std::string::npos) out.push_back(l);
    }
    return out;
  }

 private:
  struct sink final : spdlog::sinks::base_sink<std::mutex> {
    void sink_it_(const spdlog::details::log_msg& m) override {
      std::lock_guard lock(lines_mu);
      lines.emplace_back(std::string(spdlog::level::to_string_view(m.level).data(),
                                     spdlog::level::to_string_view(m.level).size()) +
                         " " + std::string(m.payload.data(), m.payload.size()));
    }
    void flush_() override {}
    mutable std::mutex lines_mu;
    std::vector<std::string> lines;
  };
  std::shared_ptr<sink> sink_;
  std::shared_ptr<spdlog::logger> previous_;
};

class DaemonAdminTest : public ::testing::Test {
 protected:
  DaemonAdminTest()
      : token_file_("token", std::string(token) + "\n"),
        svc_(parse_config(policies_yaml() + "admin: {token_file: " + token_file_.path() + "}\n",
                          "admin.yaml"),
             {}, test::unit_clock()) {}

  http_response call(const std::string& method, const std::string& target, headers hs = {},
                     const std::string& body = "", const std::string& peer = "192.0.2.7") {
    return test::call_service(svc_, ioc_, method, target, peer, hs, body);
  }
  // A JSON POST to `path` with the admin token.
  http_response admin(const std::string& path, const std::string& body) {
    return call(
        "POST", path,
        {{"Content-Type", "application/json"}, {"Authorization", std::string("Bearer ") + token}},
        body);
  }
  http_response check(const std::string& body) {
    return call("POST", "/v1/check", {{"Content-Type", "application/json"}}, body);
  }
  http_response peek(const std::string& body) {
    return call("POST", "/v1/peek", {{"Content-Type", "application/json"}}, body);
  }
  std::string metrics() { return call("GET", "/metrics").body(); }

  temp_file token_file_;
  boost::asio::io_context ioc_;
  service svc_;
};

json body_of(const http_response& r) { return json::parse(r.body()); }

// The problem's status, error code and detail, for exact comparisons.
std::string problem_of(const http_response& r) {
  EXPECT_EQ(r[boost::beast::http::field::content_type], "application/problem+json");
  const auto j = json::parse(r.body());
  EXPECT_EQ(j["status"], r.result_int());
  EXPECT_EQ(j["type"], "about:blank");
  return std::to_string(r.result_int()) + " " + j["error"].get<std::string>() + ": " +
         j["detail"].get<std::string>();
}

// ---- /v1/peek ------------------------------------------------------------------------

// A peek decides as the check after it (allowed, retry_after_ms), in the same JSON and
// headers; remaining and reset_after_ms describe the key as it is (limiter::peek), since
// nothing is spent: an allowed peek shows `cost` more remaining than that check.
TEST_F(DaemonAdminTest, PeekAnswersAsCheckWouldAndSpendsNothing) {
  const std::string body = R"({"key":"k","policy":"api"})";
  for (int round = 0; round < 2; ++round) {
    // Peeked any number of times, the answer is the same, reset_after_ms included: the
    // service's clock (a manual one) does not move between the two peeks.
    const auto p1 = peek(body);
    const auto p2 = peek(body);
    const auto c = check(body);
    ASSERT_EQ(p1.result_int(), 200u);
    const auto j1 = body_of(p1), j2 = body_of(p2);
    EXPECT_EQ(j1, j2);
    EXPECT_EQ(p1[boost::beast::http::field::content_type], "application/json");
    const auto pj = body_of(p1), cj = body_of(c);
    EXPECT_EQ(pj["allowed"], true);
    EXPECT_EQ(pj["allowed"], cj["allowed"]);
    EXPECT_EQ(pj["retry_after_ms"], cj["retry_after_ms"]);
    EXPECT_EQ(pj["limit"], cj["limit"]);
    EXPECT_EQ(pj["policy"], cj["policy"]);
    EXPECT_EQ(pj["remaining"], 2 - round);
    EXPECT_EQ(cj["remaining"], 1 - round);
    EXPECT_EQ(p1["X-RateLimit-Remaining"], std::to_string(2 - round));
    EXPECT_EQ(p1["RateLimit-Policy"], c["RateLimit-Policy"]);
    EXPECT_EQ(p1.count("Retry-After"), 0u);
  }
  // Used up: the peek is exactly the denial a check gets, Retry-After included; still 200.
  const auto p = peek(body);
  const auto c = check(body);
  ASSERT_EQ(p.result_int(), 200u);
  EXPECT_EQ(body_of(p)["allowed"], false);
  // The same body but for the wall clock's progress between the two calls (the service
  // reads the real clock; a sanitizer build on a busy machine can take milliseconds).
  auto pj = body_of(p), cj = body_of(c);
  for (const char* ms : {"retry_after_ms", "reset_after_ms"}) {
    const auto waited = pj[ms].get<std::int64_t>() - cj[ms].get<std::int64_t>();
    EXPECT_GE(waited, 0) << ms;
    EXPECT_LE(waited, 1000) << ms;
    pj.erase(ms);
    cj.erase(ms);
  }
  EXPECT_EQ(pj, cj);
  for (const char* h : {"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset",
                        "RateLimit-Policy", "RateLimit", "Retry-After", "Content-Type"}) {
    EXPECT_EQ(p[h], c[h]) << h;
  }
  EXPECT_EQ(p["Retry-After"], "1000");
  // A cost, on a window: decided for that cost, nothing spent.
  EXPECT_EQ(body_of(peek(R"({"key":"k","policy":"search","cost":3})"))["allowed"], true);
  EXPECT_EQ(body_of(check(R"({"key":"k","policy":"search","cost":2})"))["remaining"], 1);
  const auto w = body_of(peek(R"({"key":"k","policy":"search","cost":2})"));
  EXPECT_EQ(w["allowed"], false);
  EXPECT_EQ(w["remaining"], 1);
  EXPECT_EQ(body_of(check(R"({"key":"k","policy":"search"})"))["remaining"], 0);

  const auto text = metrics();
  EXPECT_NE(
      text.find(
          R"(sluice_decisions_total{endpoint="peek",policy="api",result="allowed",rule=""} 4)"),
      std::string::npos)
      << text;
  EXPECT_NE(
      text.find(
          R"(sluice_decisions_total{endpoint="peek",policy="api",result="denied",rule=""} 1)"),
      std::string::npos);
  EXPECT_NE(text.find(R"(sluice_http_requests_total{code="200",endpoint="peek"} 7)"),
            std::string::npos);
}

TEST_F(DaemonAdminTest, PeekRefusesWhatCheckRefuses) {
  const std::vector<std::pair<std::string, std::string>> bodies{
      {R"({"key":"k","policy":"nope"})", R"(422 unknown_policy: no policy named "nope")"},
      {R"({"key":"k","policy":"api","cost":3})",
       R"(422 cost_out_of_range: "cost" must be 1..2 (the capacity) for policy "api")"},
      {R"({"key":"","policy":"api"})", R"(422 invalid_key: "key" must not be empty)"},
      {R"({"key":"k"})", R"(400 invalid_request: "policy" is required)"},
      {R"({"key":"k","policy":"api","duration_ms":5})",
       R"(400 invalid_request: unknown member "duration_ms" (want key, policy, cost))"},
      {"{", "400 malformed_json: the body is not valid JSON"},
  };
  for (const auto& [body, problem] : bodies) {
    EXPECT_EQ(problem_of(peek(body)), problem) << body;
    EXPECT_EQ(problem_of(check(body)), problem) << body;
  }
  auto r = call("GET", "/v1/peek");
  EXPECT_EQ(problem_of(r), "405 method_not_allowed: POST a JSON body to /v1/peek");
  EXPECT_EQ(r[boost::beast::http::field::allow], "POST");
  r = call("POST", "/v1/peek", {{"Content-Type", "text/plain"}}, R"({"key":"k","policy":"api"})");
  EXPECT_EQ(r.result_int(), 415u);
  // Peek is open: no token needed, and one is ignored.
  EXPECT_EQ(call("POST", "/v1/peek",
                 {{"Content-Type", "application/json"}, {"Authorization", "Bearer wrong"}},
                 R"({"key":"k","policy":"api"})")
                .result_int(),
            200u);
}

// ---- the admin endpoints: what they do ---------------------------------------------

TEST_F(DaemonAdminTest, ResetForgetsTheKey) {
  const std::string body = R"({"key":"k","policy":"api"})";
  check(body);
  check(body);
  ASSERT_EQ(body_of(check(body))["allowed"], false);
  const auto r = admin("/v1/reset", body);
  ASSERT_EQ(r.result_int(), 200u) << r.body();
  EXPECT_EQ(r[boost::beast::http::field::content_type], "application/json");
  // What a check of 1 sees right after (the key's state, nothing spent): a new key, in
  // /v1/check's JSON.
  EXPECT_EQ(r.body(), R"({"allowed":true,"degraded":false,"limit":2,"policy":"api","remaining":2,)"
                      R"("reset_after_ms":0,"retry_after_ms":0})"
                      "\n");
  EXPECT_EQ(r["X-RateLimit-Remaining"], "2");
  EXPECT_EQ(body_of(check(body))["remaining"], 1);
  EXPECT_EQ(body_of(check(body))["remaining"], 0);
  // Only that key of that policy: the same key's window bucket is another limit.
  EXPECT_EQ(body_of(check(R"({"key":"k","policy":"search"})"))["remaining"], 2);
}

TEST_F(DaemonAdminTest, RefundGivesTokensBack) {
  const std::string body = R"({"key":"k","policy":"api"})";
  check(body);
  check(body);
  ASSERT_EQ(body_of(check(body))["allowed"], false);
  const auto r = admin("/v1/refund", R"({"key":"k","policy":"api","cost":1})");
  ASSERT_EQ(r.result_int(), 200u) << r.body();
  EXPECT_EQ(body_of(r)["allowed"], true);
  EXPECT_EQ(body_of(r)["remaining"], 1);  // the refunded token, not yet taken
  auto c = check(body);
  EXPECT_EQ(body_of(c)["allowed"], true);
  EXPECT_EQ(body_of(c)["remaining"], 0);
  EXPECT_EQ(body_of(check(body))["allowed"], false);
  // Never more than if nothing had been spent.
  admin("/v1/refund", R"({"key":"k","policy":"api","cost":2})");
  admin("/v1/refund", R"({"key":"k","policy":"api","cost":2})");
  EXPECT_EQ(body_of(check(body))["remaining"], 1);
}

TEST_F(DaemonAdminTest, PenalizeMakesTheClientWaitLonger) {
  const std::string body = R"({"key":"k","policy":"api"})";
  const auto r = admin("/v1/penalize", R"({"key":"k","policy":"api","cost":2})");
  ASSERT_EQ(r.result_int(), 200u) << r.body();
  EXPECT_EQ(body_of(r)["allowed"], false);
  auto c = check(body);
  EXPECT_EQ(body_of(c)["allowed"], false);
  // One token at 0.001/s: 1000 s.
  EXPECT_GT(body_of(c)["retry_after_ms"].get<std::int64_t>(), 999'000);
  EXPECT_LE(body_of(c)["retry_after_ms"].get<std::int64_t>(), 1'000'000);
  // Below zero: another 2 tokens of debt, 3000 s for one token.
  admin("/v1/penalize", R"({"key":"k","policy":"api","cost":2})");
  c = check(body);
  EXPECT_GT(body_of(c)["retry_after_ms"].get<std::int64_t>(), 2'999'000);
  EXPECT_LE(body_of(c)["retry_after_ms"].get<std::int64_t>(), 3'000'000);
}

TEST_F(DaemonAdminTest, BlockDeniesForTheDurationAndResetLiftsIt) {
  const auto r = admin("/v1/block", R"({"key":"k","policy":"api","duration_ms":60000})");
  ASSERT_EQ(r.result_int(), 200u) << r.body();
  auto j = body_of(r);
  EXPECT_EQ(j["allowed"], false);
  EXPECT_GT(j["retry_after_ms"].get<std::int64_t>(), 59'000);
  EXPECT_LE(j["retry_after_ms"].get<std::int64_t>(), 60'000);
  EXPECT_EQ(r["Retry-After"], "60");
  for (int i = 0; i < 2; ++i) {
    const auto c = check(R"({"key":"k","policy":"api"})");
    j = body_of(c);
    EXPECT_EQ(j["allowed"], false);
    EXPECT_GT(j["retry_after_ms"].get<std::int64_t>(), 59'000);
    EXPECT_LE(j["retry_after_ms"].get<std::int64_t>(), 60'000);
    EXPECT_EQ(c["Retry-After"], "60");
  }
  // Peek agrees; other keys are not blocked.
  EXPECT_EQ(body_of(peek(R"({"key":"k","policy":"api"})"))["allowed"], false);
  EXPECT_EQ(body_of(check(R"({"key":"other","policy":"api"})"))["allowed"], true);
  // A whole leap year is the longest block.
  EXPECT_EQ(admin("/v1/block", R"({"key":"long","policy":"search","duration_ms":31622400000})")
                .result_int(),
            200u);
  const auto long_wait =
      body_of(check(R"({"key":"long","policy":"search"})"))["retry_after_ms"].get<std::int64_t>();
  EXPECT_LE(long_wait, 31'622'400'000);
  EXPECT_GT(long_wait, 31'622'400'000 - 1000);  // the clock moved on since the block

  ASSERT_EQ(admin("/v1/reset", R"({"key":"k","policy":"api"})").result_int(), 200u);
  j = body_of(check(R"({"key":"k","policy":"api"})"));
  EXPECT_EQ(j["allowed"], true);
  EXPECT_EQ(j["remaining"], 1);
}

// ---- bad bodies ----------------------------------------------------------------------

TEST_F(DaemonAdminTest, BadBodiesGetExactProblems) {
  struct bad {
    std::string path, body, problem;
  };
  const std::vector<bad> cases{
      {"/v1/refund", R"({"key":"k","policy":"api"})", R"(400 invalid_request: "cost" is required)"},
      {"/v1/penalize", R"({"key":"k","policy":"api"})",
       R"(400 invalid_request: "cost" is required)"},
      {"/v1/refund", R"({"key":"k","policy":"api","cost":3})",
       R"(422 cost_out_of_range: "cost" must be 1..2 (the capacity) for policy "api")"},
      {"/v1/penalize", R"({"key":"k","policy":"search","cost":4})",
       R"(422 cost_out_of_range: "cost" must be 1..3 (the limit) for policy "search")"},
      {"/v1/refund", R"({"key":"k","policy":"api","cost":0})",
       R"(422 cost_out_of_range: "cost" must be 1..2 (the capacity) for policy "api")"},
      {"/v1/refund", R"({"key":"k","policy":"api","cost":-1})",
       R"(422 cost_out_of_range: "cost" must be 1..2 (the capacity) for policy "api")"},
      {"/v1/refund", R"({"key":"k","policy":"api","cost":"1"})",
       R"(400 invalid_request: "cost" must be an integer)"},
      {"/v1/block", R"({"key":"k","policy":"api"})",
       R"(400 invalid_request: "duration_ms" is required)"},
      {"/v1/block", R"({"key":"k","policy":"api","duration_ms":0})",
       R"(422 duration_out_of_range: "duration_ms" must be 1..31622400000 (366 days))"},
      {"/v1/block", R"({"key":"k","policy":"api","duration_ms":31622400001})",
       R"(422 duration_out_of_range: "duration_ms" must be 1..31622400000 (366 days))"},
      {"/v1/block", R"({"key":"k","policy":"api","duration_ms":-5})",
       R"(422 duration_out_of_range: "duration_ms" must be 1..31622400000 (366 days))"},
      {"/v1/block", R"({"key":"k","policy":"api","duration_ms":1.5})",
       R"(400 invalid_request: "duration_ms" must be an integer)"},
      {"/v1/block", R"({"key":"k","policy":"api","duration_ms":1,"cost":1})",
       R"(400 invalid_request: unknown member "cost" (want key, policy, duration_ms))"},
      {"/v1/reset", R"({"key":"k","policy":"api","cost":1})",
       R"(400 invalid_request: unknown member "cost" (want key, policy))"},
      {"/v1/refund", R"({"key":"k","policy":"api","cost":1,"duration_ms":1})",
       R"(400 invalid_request: unknown member "duration_ms" (want key, policy, cost))"},
      {"/v1/reset", R"({"key":"k","policy":"nope"})",
       R"(422 unknown_policy: no policy named "nope")"},
      {"/v1/block", R"({"key":"k","policy":"nope","duration_ms":1})",
       R"(422 unknown_policy: no policy named "nope")"},
      {"/v1/reset", R"({"key":"","policy":"api"})", R"(422 invalid_key: "key" must not be empty)"},
      {"/v1/reset", R"({"key":"k","key":"j","policy":"api"})",
       R"(400 invalid_request: member "key" appears more than once)"},
      {"/v1/reset", R"({"policy":"api"})", R"(400 invalid_request: "key" is required)"},
      {"/v1/reset", "[1]", "400 invalid_request: the body must be a JSON object"},
      {"/v1/reset", "", "400 malformed_json: the body is not valid JSON"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(problem_of(admin(c.path, c.body)), c.problem) << c.path << " " << c.body;
  }
  const auto long_key = json{{"key", std::string(901, 'k')}, {"policy", "api"}}.dump();
  EXPECT_EQ(problem_of(admin("/v1/reset", long_key)),
            "422 key_too_long: \"key\" is longer than 900 bytes");
  auto r = call("GET", "/v1/block", {{"Authorization", std::string("Bearer ") + token}});
  EXPECT_EQ(problem_of(r), "405 method_not_allowed: POST a JSON body to /v1/block");
  EXPECT_EQ(r[boost::beast::http::field::allow], "POST");
  r = call("POST", "/v1/reset",
           {{"Authorization", std::string("Bearer ") + token}, {"Content-Type", "text/plain"}},
           R"({"key":"k","policy":"api"})");
  EXPECT_EQ(r.result_int(), 415u);
  // None of them changed anything.
  EXPECT_EQ(body_of(check(R"({"key":"k","policy":"api"})"))["remaining"], 1);
  const auto text = metrics();
  EXPECT_NE(text.find(R"(sluice_admin_requests_total{endpoint="block",outcome="invalid"} 8)"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find(R"(outcome="ok")"), std::string::npos);
}

// ---- authentication -----------------------------------------------------------------

TEST_F(DaemonAdminTest, WithoutTheRightBearerTokenNothingHappens) {
  const std::string body = R"({"key":"k","policy":"api","duration_ms":60000})";
  const std::string t = token;
  struct attempt {
    const char* name;
    headers auth;
    unsigned status;
    std::string problem;
  };
  const std::string missing =
      "401 unauthorized: this endpoint needs \"Authorization: Bearer <token>\" with the admin "
      "token";
  const std::string malformed =
      "401 unauthorized: the Authorization header must be \"Bearer <token>\", once";
  const std::string forbidden = "403 forbidden: the bearer token is not the admin token";
  const std::vector<attempt> attempts{
      {"no header", {}, 401, missing},
      {"another scheme", {{"Authorization", "Basic " + t}}, 401, malformed},
      {"the token alone", {{"Authorization", t}}, 401, malformed},
      {"no token", {{"Authorization", "Bearer"}}, 401, malformed},
      {"blank token", {{"Authorization", "Bearer   "}}, 401, malformed},
      {"two tokens", {{"Authorization", "Bearer " + t + " " + t}}, 401, malformed},
      {"not token68", {{"Authorization", "Bearer " + t + "\xff"}}, 401, malformed},
      {"twice",
       {{"Authorization", "Bearer " + t}, {"Authorization", "Bearer " + t}},
       401,
       malformed},
      {"wrong token", {{"Authorization", "Bearer " + std::string(t.size(), 'x')}}, 403, forbidden},
      {"last byte differs",
       {{"Authorization", "Bearer " + t.substr(0, t.size() - 1) + "8"}},
       403,
       forbidden},
      {"a prefix", {{"Authorization", "Bearer " + t.substr(0, t.size() - 1)}}, 403, forbidden},
      {"longer", {{"Authorization", "Bearer " + t + "0"}}, 403, forbidden},
      {"twice over", {{"Authorization", "Bearer " + t + t}}, 403, forbidden},
      {"other case",
       {{"Authorization", "Bearer " + std::string("S3CR3T") + t.substr(6)}},
       403,
       forbidden},
  };
  for (const auto& a : attempts) {
    auto hs = a.auth;
    hs.emplace_back("Content-Type", "application/json");
    const auto r = call("POST", "/v1/block", hs, body);
    EXPECT_EQ(r.result_int(), a.status) << a.name;
    EXPECT_EQ(problem_of(r), a.problem) << a.name;
    if (a.status == 401) {
      EXPECT_EQ(r[boost::beast::http::field::www_authenticate], "Bearer") << a.name;
    } else {
      EXPECT_EQ(r.count(boost::beast::http::field::www_authenticate), 0u) << a.name;
    }
  }
  // Nothing was blocked.
  EXPECT_EQ(body_of(check(R"({"key":"k","policy":"api"})"))["allowed"], true);
  // Authentication comes first: a stranger learns nothing about methods or bodies.
  EXPECT_EQ(call("GET", "/v1/reset").result_int(), 401u);
  EXPECT_EQ(call("POST", "/v1/reset", {{"Content-Type", "text/plain"}}, "x").result_int(), 401u);
  // The scheme is case-insensitive, and spaces before the token are allowed.
  EXPECT_EQ(call("POST", "/v1/block",
                 {{"Authorization", "bEaReR   " + t}, {"Content-Type", "application/json"}}, body)
                .result_int(),
            200u);

  const auto text = metrics();
  EXPECT_NE(text.find(R"(sluice_admin_requests_total{endpoint="block",outcome="unauthorized"} 8)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(R"(sluice_admin_requests_total{endpoint="block",outcome="forbidden"} 6)"),
            std::string::npos);
  EXPECT_NE(text.find(R"(sluice_admin_requests_total{endpoint="block",outcome="ok"} 1)"),
            std::string::npos);
  EXPECT_NE(text.find(R"(sluice_admin_requests_total{endpoint="reset",outcome="unauthorized"} 2)"),
            std::string::npos);
}

TEST_F(DaemonAdminTest, EveryCallIsLoggedOnceWithoutTheToken) {
  log_capture logs;
  const std::string t = token;
  admin("/v1/block", R"({"key":"user:42","policy":"api","duration_ms":60000})");
  call("POST", "/v1/reset",
       {{"Content-Type", "application/json"}, {"Authorization", "Bearer " + t + "x"}},
       R"({"key":"user:43","policy":"api"})", "203.0.113.9");
  call("POST", "/v1/refund", {{"Authorization", "Basic " + t}}, "", "2001:db8::1");
  admin("/v1/penalize", R"({"key":"user:\n44","policy":"api"})");
  admin("/v1/refund", R"({"key":"user:45","policy":"api","cost":1})");
  admin("/v1/reset", R"({"key":"user:46","policy":"api, key user:1"})");

  const auto lines = logs.lines_with("admin ");
  ASSERT_EQ(lines.size(), 6u);
  EXPECT_EQ(
      lines[0],
      "info admin block from 192.0.2.7: ok (200); policy api, duration_ms 60000, key user:42");
  EXPECT_EQ(lines[1],
            "warning admin reset from 203.0.113.9: forbidden (403); policy api, key user:43");
  EXPECT_EQ(lines[2], "warning admin refund from 2001:db8::1: unauthorized (401); no key");
  // The key as sent; the daemon's sink escapes the newline (safe_log), this capture does not.
  EXPECT_EQ(lines[3],
            "info admin penalize from 192.0.2.7: invalid (400); policy api, key user:\n44");
  EXPECT_EQ(lines[4],
            "info admin refund from 192.0.2.7: ok (200); policy api, cost 1, key user:45");
  // Only a policy name is logged as such: a body cannot fake the key.
  EXPECT_EQ(lines[5],
            "info admin reset from 192.0.2.7: invalid (422); policy (not a policy name), key "
            "user:46");
  for (const auto& l : logs.lines()) {
    EXPECT_EQ(l.find(t.substr(0, 16)), std::string::npos) << l;
  }
}

TEST_F(DaemonAdminTest, RefusedCallsInBulkAreEachLogged) {
  log_capture logs;
  for (int i = 0; i < 20; ++i) call("POST", "/v1/reset");
  EXPECT_EQ(logs.lines_with("admin reset").size(), 20u);
}

TEST(DaemonAdminOffTest, WithoutATokenFileTheEndpointsDoNotExist) {
  service svc(parse_config(policies_yaml(), "off.yaml"), {}, test::unit_clock());
  boost::asio::io_context ioc;
  auto run = [&](const std::string& target, const headers& hs) {
    return test::call_service(svc, ioc, "POST", target, "127.0.0.1", hs,
                              R"({"key":"k","policy":"api","duration_ms":1000})");
  };
  const headers with_token{{"Content-Type", "application/json"},
                           {"Authorization", std::string("Bearer ") + token}};
  for (const char* path : {"/v1/reset", "/v1/refund", "/v1/penalize", "/v1/block"}) {
    const auto r = run(path, with_token);
    const auto unknown = run(std::string(path) + "x", with_token);
    EXPECT_EQ(r.result_int(), 404u) << path;
    EXPECT_EQ(json::parse(r.body())["detail"], std::string("no such endpoint: ") + path);
    EXPECT_EQ(json::parse(r.body())["error"], json::parse(unknown.body())["error"]);
    EXPECT_EQ(r.count(boost::beast::http::field::www_authenticate), 0u);
  }
  // Peek is not an admin endpoint: always there.
  EXPECT_EQ(run("/v1/peek", {{"Content-Type", "application/json"}}).result_int(), 400u)
      << "duration_ms is not a check member";
}

// ---- the token file in the config -----------------------------------------------------

config_error admin_error_of(const std::string& admin_yaml, const std::string& source = "a.yaml") {
  try {
    parse_config(policies_yaml() + admin_yaml, source);
  } catch (const config_error& e) {
    return e;
  }
  ADD_FAILURE() << "no config_error for:\n" << admin_yaml;
  return config_error("", 0, "", "");
}

TEST(DaemonAdminConfigTest, TheTokenIsReadWithoutItsTrailingNewline) {
  temp_file crlf("crlf", std::string(token) + "\r\n");
  auto c = parse_config(policies_yaml() + "admin:\n  token_file: " + crlf.path() + "\n", "a.yaml");
  EXPECT_EQ(c.admin.token, token);
  EXPECT_EQ(c.admin.token_file, crlf.path());
  EXPECT_TRUE(c.admin.enabled());
  temp_file exact("exact16", "0123456789abcdef");
  EXPECT_EQ(parse_config(policies_yaml() + "admin: {token_file: " + exact.path() + "}\n", "a.yaml")
                .admin.token,
            "0123456789abcdef");
  temp_file padded("padded", "abcdefghijklmnop+/==\n");
  EXPECT_EQ(parse_config(policies_yaml() + "admin: {token_file: " + padded.path() + "}\n", "a.yaml")
                .admin.token,
            "abcdefghijklmnop+/==");
  EXPECT_FALSE(parse_config(policies_yaml(), "a.yaml").admin.enabled());
}

TEST(DaemonAdminConfigTest, ARelativeTokenFileIsBesideTheConfig) {
  const auto dir = ::testing::TempDir() + "sluice-admin-rel";
  ::mkdir(dir.c_str(), 0700);
  {
    std::ofstream(dir + "/admin.token") << token << "\n";
    std::ofstream(dir + "/sluiced.yaml") << policies_yaml() << "admin: {token_file: admin.token}\n";
  }
  const auto c = load_config_file(dir + "/sluiced.yaml");
  EXPECT_EQ(c.admin.token, token);
  EXPECT_EQ(c.admin.token_file, "admin.token");
  std::remove((dir + "/admin.token").c_str());
  std::remove((dir + "/sluiced.yaml").c_str());
  ::rmdir(dir.c_str());
}

TEST(DaemonAdminConfigTest, BadTokenFilesNameFileLineAndField) {
  temp_file empty("empty", "");
  temp_file newline("newline", "\n");
  temp_file short_token("short", "0123456789abcde\n");  // 15 bytes
  temp_file two_lines("two-lines", "0123456789abcdef\n0123456789abcdef\n");
  temp_file spaced("spaced", "0123456789 abcdef\n");
  temp_file big("big", std::string(5000, 'a'));
  const std::string dir = ::testing::TempDir();
  struct bad {
    std::string yaml;
    int line;
    std::string field, message;
  };
  const std::vector<bad> cases{
      {"admin: {token_file: /nonexistent/admin.token}\n", 4, "admin.token_file",
       "cannot read \"/nonexistent/admin.token\": No such file or directory"},
      {"admin: {token_file: " + empty.path() + "}\n", 4, "admin.token_file",
       "\"" + empty.path() + "\" is empty; it must hold one token of at least 16 bytes"},
      {"admin: {token_file: " + newline.path() + "}\n", 4, "admin.token_file",
       "\"" + newline.path() + "\" is empty; it must hold one token of at least 16 bytes"},
      {"admin:\n  token_file: " + short_token.path() + "\n", 5, "admin.token_file",
       "the token in \"" + short_token.path() + "\" is 15 bytes; at least 16 are required"},
      {"admin: {token_file: " + two_lines.path() + "}\n", 4, "admin.token_file",
       "the token in \"" + two_lines.path() +
           "\" must be one line of A-Z a-z 0-9 - . _ ~ + / (then = padding): it is sent as "
           "\"Authorization: Bearer <token>\""},
      {"admin: {token_file: " + spaced.path() + "}\n", 4, "admin.token_file",
       "the token in \"" + spaced.path() +
           "\" must be one line of A-Z a-z 0-9 - . _ ~ + / (then = padding): it is sent as "
           "\"Authorization: Bearer <token>\""},
      {"admin: {token_file: " + big.path() + "}\n", 4, "admin.token_file",
       "\"" + big.path() + "\" is larger than 4096 bytes; it must hold one token"},
      {"admin: {token_file: " + dir + "}\n", 4, "admin.token_file",
       "\"" + dir + "\" is not a regular file"},
      {"admin: {token_file: /dev/null}\n", 4, "admin.token_file",
       "\"/dev/null\" is not a regular file"},
      {"admin: {token_file: \"\"}\n", 4, "admin.token_file", "must not be empty"},
      {"admin: {}\n", 4, "admin.token_file", "is required (a file holding the admin bearer token)"},
      {"admin: /etc/token\n", 4, "admin", "must be a mapping"},
      {"admin: {token_file: /x, token: abc}\n", 4, "admin.token", "unknown key"},
  };
  for (const auto& c : cases) {
    const auto e = admin_error_of(c.yaml);
    EXPECT_EQ(e.file(), "a.yaml") << c.yaml;
    EXPECT_EQ(e.line(), c.line) << c.yaml;
    EXPECT_EQ(e.field(), c.field) << c.yaml;
    EXPECT_EQ(e.message(), c.message) << c.yaml;
  }
  // Whatever the file holds stays out of the message.
  temp_file secretish("secretish", "hunter2 hunter2 hunter2\n");
  const auto e = admin_error_of("admin: {token_file: " + secretish.path() + "}\n");
  EXPECT_EQ(std::string(e.what()).find("hunter2"), std::string::npos) << e.what();
}

TEST(DaemonAdminConfigTest, CheckConfigExitsTwoOnABadTokenFile) {
  temp_file short_token("cli-short", "tooshort\n");
  temp_file cfg("cli.yaml", policies_yaml() + "admin:\n  token_file: " + short_token.path() + "\n");
  std::vector<std::string> args{"sluiced", "--config", cfg.path(), "--check-config"};
  std::vector<const char*> argv;
  for (auto& a : args) argv.push_back(a.c_str());
  app_options opts;
  std::ostringstream out, err;
  EXPECT_EQ(parse_command_line(static_cast<int>(argv.size()), argv.data(), opts, out, err), 2);
  EXPECT_EQ(err.str(), cfg.path() + ":5: admin.token_file: the token in \"" + short_token.path() +
                           "\" is 8 bytes; at least 16 are required\n");
  short_token.write(std::string(token) + "\n");
  err.str("");
  EXPECT_EQ(parse_command_line(static_cast<int>(argv.size()), argv.data(), opts, out, err), 0)
      << err.str();
}

TEST(DaemonAdminConfigTest, ReloadReadsTheTokenAgainAndKeepsTheOldOneWhenInvalid) {
  temp_file token_file("reload-token", std::string(token) + "\n");
  temp_file cfg("reload.yaml",
                policies_yaml() + "admin: {token_file: " + token_file.path() + "}\n");
  service svc(load_config_file(cfg.path()), {}, test::unit_clock());
  boost::asio::io_context ioc;
  auto reset_with = [&](const std::string& t) {
    http_request req{boost::beast::http::verb::post, "/v1/reset", 11};
    req.set("Content-Type", "application/json");
    req.set("Authorization", "Bearer " + t);
    req.body() = R"({"key":"k","policy":"api"})";
    req.prepare_payload();
    std::optional<http_response> out;
    svc.handle(std::move(req), "127.0.0.1", ioc.get_executor(),
               [&](http_response r) { out = std::move(r); });
    ioc.restart();
    ioc.run();
    return out->result_int();
  };
  EXPECT_EQ(reset_with(token), 200u);
  const std::string next = "another-admin-token-abcdefgh";
  token_file.write(next + "\n");
  ASSERT_TRUE(svc.reload(cfg.path()));
  EXPECT_EQ(reset_with(token), 403u);
  EXPECT_EQ(reset_with(next), 200u);
  // An invalid token file on reload: rejected, the token in force keeps working.
  token_file.write("short\n");
  EXPECT_FALSE(svc.reload(cfg.path()));
  EXPECT_EQ(reset_with(next), 200u);
  std::remove(token_file.path().c_str());
  EXPECT_FALSE(svc.reload(cfg.path()));
  EXPECT_EQ(reset_with(next), 200u);
  // Without the admin section the endpoints are gone.
  cfg.write(policies_yaml());
  ASSERT_TRUE(svc.reload(cfg.path()));
  EXPECT_EQ(reset_with(next), 404u);
}

// ---- the pieces ----------------------------------------------------------------------

TEST(DaemonAdminTokenTest, TokensEqualComparesEveryByteAndTheLength) {
  EXPECT_TRUE(tokens_equal("0123456789abcdef", "0123456789abcdef"));
  EXPECT_FALSE(tokens_equal("0123456789abcdeF", "0123456789abcdef"));
  EXPECT_FALSE(tokens_equal("X123456789abcdef", "0123456789abcdef"));
  EXPECT_FALSE(tokens_equal("0123456789abcde", "0123456789abcdef"));
  EXPECT_FALSE(tokens_equal("0123456789abcdef0", "0123456789abcdef"));
  // `expected` repeated must not pass for it.
  EXPECT_FALSE(tokens_equal("0123456789abcdef0123456789abcdef", "0123456789abcdef"));
  EXPECT_FALSE(tokens_equal("", "0123456789abcdef"));
  EXPECT_FALSE(tokens_equal("", ""));
  EXPECT_FALSE(tokens_equal("a", ""));
  EXPECT_TRUE(tokens_equal(std::string(4096, 'z'), std::string(4096, 'z')));
}

TEST(DaemonAdminTokenTest, BearerCredentialsAreReadStrictly) {
  using kind = bearer_credentials::kind;
  EXPECT_EQ(parse_bearer(0, "").what, kind::missing);
  EXPECT_EQ(parse_bearer(2, "Bearer abc").what, kind::malformed);
  EXPECT_EQ(parse_bearer(1, "").what, kind::malformed);
  EXPECT_EQ(parse_bearer(1, "Bearer").what, kind::malformed);
  EXPECT_EQ(parse_bearer(1, "Bearer ").what, kind::malformed);
  EXPECT_EQ(parse_bearer(1, "Bearerabc").what, kind::malformed);
  EXPECT_EQ(parse_bearer(1, "Basic abc").what, kind::malformed);
  EXPECT_EQ(parse_bearer(1, "Bearer a b").what, kind::malformed);
  EXPECT_EQ(parse_bearer(1, "Bearer a=b").what, kind::malformed);
  EXPECT_EQ(parse_bearer(1, "Bearer\tabc").what, kind::malformed);
  auto b = parse_bearer(1, "  bearer  abc+/-._~==  ");
  EXPECT_EQ(b.what, kind::token);
  EXPECT_EQ(b.token, "abc+/-._~==");
  EXPECT_TRUE(is_token68("abc"));
  EXPECT_TRUE(is_token68("a="));
  EXPECT_FALSE(is_token68("=a"));
  EXPECT_FALSE(is_token68(""));
  EXPECT_FALSE(is_token68("a\xc3\xa9"));
}

TEST(DaemonAdminTokenTest, EndpointsAreRouted) {
  EXPECT_EQ(service::endpoint_of("/v1/peek"), "peek");
  EXPECT_EQ(service::endpoint_of("/v1/reset?x"), "reset");
  EXPECT_EQ(service::endpoint_of("/v1/refund"), "refund");
  EXPECT_EQ(service::endpoint_of("/v1/penalize"), "penalize");
  EXPECT_EQ(service::endpoint_of("/v1/block"), "block");
  EXPECT_EQ(service::endpoint_of("/v1/block/"), "other");
  EXPECT_EQ(admin_operation("block"), key_operation::block);
  EXPECT_EQ(admin_operation("peek"), std::nullopt);
  EXPECT_EQ(admin_operation("check"), std::nullopt);
}

}  // namespace
}  // namespace sluice::daemon

namespace sluice::daemon {
namespace {

TEST_F(DaemonAdminTest, ACallTheServerRefusedIsLoggedAndCounted) {
  log_capture logs;
  svc_.refused_before_handling("block", "192.0.2.1", 413);
  svc_.refused_before_handling("check", "192.0.2.1", 413);
  EXPECT_EQ(logs.lines_with("admin "),
            std::vector<std::string>{"info admin block from 192.0.2.1: invalid (413); no key"});
  EXPECT_NE(metrics().find(R"(sluice_admin_requests_total{endpoint="block",outcome="invalid"} 1)"),
            std::string::npos);
}

}  // namespace
}  // namespace sluice::daemon
