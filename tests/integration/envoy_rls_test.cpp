// sluiced as Envoy's rate limit service, driven by a gRPC client Sluice did not write:
// Debian's python3-grpcio with the messages protoc --python_out made from proto/
// (tests/integration/envoy/rls_client.py). Exact counts under 50 concurrent clients on
// memory and on a real Redis, all-or-nothing across descriptors, hits_addend and request
// overrides, wildcards, shadow mode, a dead Redis answered UNAVAILABLE within the timeout,
// SIGHUP reloads of the limits files, the health service, POST /json, and the envoy_rls
// options: shadow_mode, response_headers, request_headers, per_unit_headers, quota mode and
// TLS (mutual TLS, client_san, certificates re-read on SIGHUP and when the files change) on
// the gRPC listener.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "support/cluster_fixture.hpp"
#include "support/daemon_http_client.hpp"
#include "support/daemon_sluiced.hpp"
#include "support/process_child.hpp"
#include "support/redis_server.hpp"
#include "support/test_pki.hpp"

namespace sluice::test {
namespace {

using json = nlohmann::json;
using std::chrono::milliseconds;

#if defined(SLUICE_PYTHON3) && defined(SLUICE_ENVOY_PB_DIR)
constexpr bool have_client = true;
constexpr const char* python = SLUICE_PYTHON3;
constexpr const char* pb_dir = SLUICE_ENVOY_PB_DIR;
#else
constexpr bool have_client = false;
constexpr const char* python = "";
constexpr const char* pb_dir = "";
#endif

#define REQUIRE_CLIENT() \
  if (!have_client) GTEST_SKIP() << "built without python3 or the proto's Python messages"

// The limits of most tests: domain `edge` in the reference service's format.
constexpr const char* edge_limits = R"(domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: hour, requests_per_unit: 37}
  - key: tenant
    rate_limit: {unit: hour, requests_per_unit: 5}
  - key: plan
    value: free
    rate_limit: {unit: hour, requests_per_unit: 2}
  - key: quota
    rate_limit: {unit: hour, requests_per_unit: 10}
  - key: path
    value: "/api/*"
    rate_limit: {unit: hour, requests_per_unit: 2}
  - key: user
    value: "vip*"
    rate_limit: {unlimited: true}
  - key: watch
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1, name: watcher}
)";

// One descriptor of one entry, as the proto's JSON mapping.
std::string entry(const std::string& key, const std::string& value) {
  return R"({"entries":[{"key":")" + key + R"(","value":")" + value + R"("}]})";
}
std::string request(const std::vector<std::string>& descriptors, int hits_addend = 0,
                    const std::string& domain = "edge") {
  std::string s = R"({"domain":")" + domain + R"(","descriptors":[)";
  for (std::size_t i = 0; i < descriptors.size(); ++i) s += (i ? "," : "") + descriptors[i];
  s += "]";
  if (hits_addend) s += R"(,"hitsAddend":)" + std::to_string(hits_addend);
  return s + "}";
}

std::uint64_t remaining(const json& status) { return status.value("limit_remaining", 0ULL); }

// sluiced with an envoy_rls section whose limits file is `limits`; its gRPC port is 0 (a
// free one), read back from the start-up log line.
class rls_daemon {
 public:
  // `rls_yaml`: more keys of the envoy_rls section, each line indented by two spaces.
  explicit rls_daemon(const std::string& limits, const std::string& extra_yaml = "",
                      const std::string& mode = "unavailable", const std::string& rls_yaml = "")
      : dir_(make_temp_dir("sluice-rls-limits")), extra_yaml_(extra_yaml), mode_(mode) {
    write_limits(limits);
    daemon_ = std::make_unique<sluiced_process>(yaml(rls_yaml));
    const auto log = daemon_->process().stderr_text();
    const std::string marker = "ShouldRateLimit (gRPC) listening on 127.0.0.1:";
    const auto at = log.find(marker);
    if (at == std::string::npos) throw std::runtime_error("no gRPC listener in the log: " + log);
    grpc_port_ = static_cast<std::uint16_t>(std::stoi(log.substr(at + marker.size())));
  }
  ~rls_daemon() {
    daemon_.reset();
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  void write_limits(const std::string& yaml) {
    const auto tmp = dir_ + "/limits.yaml.tmp";
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      out << yaml;
    }
    std::filesystem::rename(tmp, dir_ + "/limits.yaml");
  }

  // The config with other keys of the envoy_rls section (then SIGHUP: sluiced().reload()).
  void rewrite(const std::string& rls_yaml) { daemon_->write_config(yaml(rls_yaml)); }

  sluiced_process& sluiced() { return *daemon_; }
  std::string target() const { return "127.0.0.1:" + std::to_string(grpc_port_); }

  // Runs the Python client (with `channel` options such as --ca first); its JSON output.
  json client(std::vector<std::string> args, int timeout_ms = 5000,
              const std::vector<std::string>& channel = {}) {
    std::vector<std::string> argv{
        python,         std::string(SLUICE_SOURCE_DIR) + "/tests/integration/envoy/rls_client.py",
        "--pb-dir",     pb_dir,
        "--target",     target(),
        "--timeout-ms", std::to_string(timeout_ms)};
    argv.insert(argv.end(), channel.begin(), channel.end());
    argv.insert(argv.end(), args.begin(), args.end());
    process_child p(argv, "rls_client");
    const auto rc = p.wait(std::chrono::seconds{120});
    if (rc != 0) {
      throw std::runtime_error("rls_client.py failed (" + (rc ? std::to_string(*rc) : "timeout") +
                               "): " + p.stderr_text());
    }
    return json::parse(p.stdout_text());
  }
  // Each request in turn; the answers.
  json call(const std::vector<std::string>& requests, int timeout_ms = 5000) {
    std::vector<std::string> args{"call"};
    args.insert(args.end(), requests.begin(), requests.end());
    return client(args, timeout_ms);
  }
  json call_one(const std::string& req) { return call({req}).at(0); }

 private:
  std::string yaml(const std::string& rls_yaml) const {
    return extra_yaml_ + R"(
policies:
  api: {capacity: 5, refill_per_second: 1}
envoy_rls:
  listen: 127.0.0.1:0
  config: [)" +
           dir_ + R"(/limits.yaml]
  on_backend_failure: )" +
           mode_ + "\n" + rls_yaml;
  }

  std::string dir_;
  std::string extra_yaml_;
  std::string mode_;
  std::unique_ptr<sluiced_process> daemon_;
  std::uint16_t grpc_port_ = 0;
};

bool has_line(const std::string& text, const std::string& line) {
  return text.find(line + "\n") != std::string::npos;
}

// 50 clients on their own channels, 4 calls each, one limit of 37: exactly 37 admitted.
void expect_exact_under_concurrency(rls_daemon& d) {
  auto out = d.client({"concurrent", "--clients", "50", "--calls", "4",
                       request({entry("remote_address", "10.0.0.1")})});
  EXPECT_EQ(out.at("OK"), 37) << out.dump();
  EXPECT_EQ(out.at("OVER_LIMIT"), 200 - 37) << out.dump();
  EXPECT_TRUE(out.at("errors").empty()) << out.dump();
}

TEST(EnvoyRlsTest, ConcurrentClientsAdmitExactlyTheLimitOnMemory) {
  REQUIRE_CLIENT();
  rls_daemon d(edge_limits, "backend: memory");
  expect_exact_under_concurrency(d);
}

TEST(EnvoyRlsTest, ConcurrentClientsAdmitExactlyTheLimitOnRedis) {
  REQUIRE_CLIENT();
  redis_server redis;
  rls_daemon d(edge_limits, "backend: " + redis.url());
  expect_exact_under_concurrency(d);
}

// tenant (5) and plan=free (2) in one request: the third request is denied by plan, and
// denied as a whole, so tenant keeps what it had (3 left), as a request of tenant alone shows.
void expect_all_or_nothing(rls_daemon& d) {
  const auto both = request({entry("tenant", "t1"), entry("plan", "free")});
  auto r = d.call({both, both, both, request({entry("tenant", "t1")})});
  ASSERT_EQ(r.size(), 4u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(r[i].at("response").at("overall_code"), "OK") << r.dump();
  }
  const auto& denied = r[2].at("response");
  EXPECT_EQ(denied.at("overall_code"), "OVER_LIMIT") << r.dump();
  // Statuses in request order: tenant would have allowed (OK, 3 left), plan is over.
  EXPECT_EQ(denied.at("statuses").at(0).at("code"), "OK");
  EXPECT_EQ(remaining(denied.at("statuses").at(0)), 3u);
  EXPECT_EQ(denied.at("statuses").at(1).at("code"), "OVER_LIMIT");
  EXPECT_EQ(denied.at("statuses").at(1).at("current_limit").at("requests_per_unit"), 2);
  EXPECT_EQ(denied.at("statuses").at(1).at("current_limit").at("unit"), "HOUR");
  EXPECT_TRUE(denied.at("statuses").at(1).contains("duration_until_reset"));
  // The denied request spent nothing of tenant's: 5 - 2 spent - 1 now = 2 left.
  const auto& alone = r[3].at("response");
  EXPECT_EQ(alone.at("overall_code"), "OK");
  EXPECT_EQ(remaining(alone.at("statuses").at(0)), 2u) << r.dump();
}

TEST(EnvoyRlsTest, MultiDescriptorRequestIsAllOrNothingOnMemory) {
  REQUIRE_CLIENT();
  rls_daemon d(edge_limits, "backend: memory");
  expect_all_or_nothing(d);
}

TEST(EnvoyRlsTest, MultiDescriptorRequestIsAllOrNothingOnRedis) {
  REQUIRE_CLIENT();
  redis_server redis;
  rls_daemon d(edge_limits, "backend: " + redis.url());
  expect_all_or_nothing(d);
}

// Quota mode beside an ordinary limit: q1 (1 per minute, quota mode) is decided first; when
// its group (the only one) is over, the request is denied and tenant spends nothing.
void expect_quota_mode_decided_first(rls_daemon& d) {
  const auto mixed = request({entry("tenant", "qm"), entry("q1", "qm")});
  auto r = d.call({mixed, mixed, request({entry("tenant", "qm")})});
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].at("response").at("overall_code"), "OK") << r.dump();
  EXPECT_EQ(remaining(r[0].at("response").at("statuses").at(0)), 4u) << r.dump();
  const auto& denied = r[1].at("response");
  EXPECT_EQ(denied.at("overall_code"), "OVER_LIMIT") << r.dump();
  EXPECT_EQ(denied.at("statuses").at(0).at("code"), "OK");
  EXPECT_EQ(denied.at("statuses").at(1).at("code"), "OVER_LIMIT");
  // tenant: 5 - 1 - (nothing for the denied one) - 1 now = 3.
  EXPECT_EQ(remaining(r[2].at("response").at("statuses").at(0)), 3u) << r.dump();
  // With a second quota group that has room (q2), the request goes through and q1 says
  // it is over.
  auto soft = d.call_one(request({entry("q1", "qm"), entry("q2", "qm"), entry("tenant", "qm")}));
  EXPECT_EQ(soft.at("response").at("overall_code"), "OK") << soft.dump();
  EXPECT_EQ(soft.at("response").at("statuses").at(0).at("code"), "OVER_LIMIT");
  EXPECT_EQ(remaining(soft.at("response").at("statuses").at(2)), 2u) << soft.dump();
  // Both phases under 50 concurrent clients: the ordinary limit of 37 admits exactly 37.
  auto out = d.client({"concurrent", "--clients", "50", "--calls", "4",
                       request({entry("remote_address", "10.9.9.9"), entry("q3", "c")})});
  EXPECT_EQ(out.at("OK"), 37) << out.dump();
  EXPECT_EQ(out.at("OVER_LIMIT"), 200 - 37) << out.dump();
  EXPECT_TRUE(out.at("errors").empty()) << out.dump();
}

const std::string quota_limits = std::string(edge_limits) + R"(  - key: q1
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: q2
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: q3
    quota_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1000}
)";

TEST(EnvoyRlsTest, QuotaModeIsDecidedFirstAndADeniedRequestSpendsNothingOnMemory) {
  REQUIRE_CLIENT();
  rls_daemon d(quota_limits, "backend: memory");
  expect_quota_mode_decided_first(d);
}

TEST(EnvoyRlsTest, QuotaModeIsDecidedFirstAndADeniedRequestSpendsNothingOnRedis) {
  REQUIRE_CLIENT();
  redis_server redis;
  // Two backend round trips per call, 50 clients on a shared 2-core machine: a timeout
  // well above the default 50 ms, so that a slow moment is not an UNAVAILABLE here.
  rls_daemon d(quota_limits, "backend: " + redis.url() + "\nbackend_timeout_ms: 2000");
  expect_quota_mode_decided_first(d);
}

// On Redis Cluster every bucket of a domain carries the domain as its hash tag, so all of a
// request's limits are on one slot: one atomic step there too, never decided slot by slot.
TEST(EnvoyRlsTest, MultiDescriptorRequestIsAllOrNothingOnCluster) {
  REQUIRE_CLIENT();
  redis_cluster_options o;
  o.replicas_per_master = 0;
  redis_cluster cluster(o);
  rls_daemon d(edge_limits, "backend: " + cluster.url());
  expect_all_or_nothing(d);
  auto r = d.call({request({entry("tenant", "a"), entry("remote_address", "b"),
                            entry("path", "/api/c"), entry("quota", "d")})});
  EXPECT_EQ(r[0].at("response").at("overall_code"), "OK") << r.dump();
  const auto text = http_request(d.sluiced().port(), "GET", "/metrics").body;
  EXPECT_TRUE(has_line(text, "sluice_redis_cluster_cross_slot_total 0")) << text;
}

TEST(EnvoyRlsTest, HitsAddendPeeksAndOverrides) {
  REQUIRE_CLIENT();
  redis_server redis;
  rls_daemon d(edge_limits, "backend: " + redis.url());
  const auto q = entry("quota", "q1");
  // The descriptor's own hits_addend: 0 looks without spending, 20 is more than the limit.
  const std::string peek = R"({"entries":[{"key":"quota","value":"q1"}],"hitsAddend":0})";
  const std::string huge = R"({"entries":[{"key":"quota","value":"q1"}],"hitsAddend":"20"})";
  const std::string two = R"({"entries":[{"key":"quota","value":"q1"}],"hitsAddend":2})";
  auto r = d.call(
      {request({q}, 3), request({peek}), request({huge}), request({two}, 5), request({peek})});
  auto status = [&](int i) { return r.at(i).at("response").at("statuses").at(0); };
  EXPECT_EQ(remaining(status(0)), 7u) << r.dump();  // the request's hits_addend 3
  EXPECT_EQ(status(1).at("code"), "OK");
  EXPECT_EQ(remaining(status(1)), 7u);  // a look: nothing spent
  EXPECT_EQ(r[2].at("response").at("overall_code"), "OVER_LIMIT");
  EXPECT_EQ(remaining(status(3)), 5u);  // the descriptor's 2 overrides the request's 5
  EXPECT_EQ(remaining(status(4)), 5u);  // the 20 spent nothing

  // A request's own limit: 2 per hour on a key the config does not know.
  const std::string own =
      R"({"entries":[{"key":"anything","value":"x"}],"limit":{"requestsPerUnit":2,"unit":"HOUR"}})";
  auto o = d.call({request({own}), request({own}), request({own})});
  EXPECT_EQ(o[0].at("response").at("statuses").at(0).at("current_limit").at("requests_per_unit"),
            2);
  EXPECT_EQ(o[1].at("response").at("overall_code"), "OK");
  EXPECT_EQ(o[2].at("response").at("overall_code"), "OVER_LIMIT") << o.dump();
}

TEST(EnvoyRlsTest, WildcardsUnlimitedAndUnknownDescriptors) {
  REQUIRE_CLIENT();
  rls_daemon d(edge_limits, "backend: memory");
  const auto a = request({entry("path", "/api/a")});
  auto r = d.call({a, a, a, request({entry("path", "/api/b")}), request({entry("user", "vip-7")}),
                   request({entry("nothing", "here")}), request({entry("path", "/other")})});
  EXPECT_EQ(r[1].at("response").at("overall_code"), "OK");
  EXPECT_EQ(r[2].at("response").at("overall_code"), "OVER_LIMIT") << r.dump();
  // Each value a wildcard matches has its own bucket.
  EXPECT_EQ(r[3].at("response").at("overall_code"), "OK");
  EXPECT_EQ(remaining(r[3].at("response").at("statuses").at(0)), 1u);
  // unlimited: OK, all the room there is, no current_limit (as the reference).
  const auto& vip = r[4].at("response").at("statuses").at(0);
  EXPECT_EQ(vip.at("code"), "OK");
  EXPECT_EQ(remaining(vip), 4294967295u);
  EXPECT_FALSE(vip.contains("current_limit"));
  for (int i : {5, 6}) {
    EXPECT_EQ(r[i].at("response").at("overall_code"), "OK");
    EXPECT_FALSE(r[i].at("response").at("statuses").at(0).contains("current_limit"));
  }
}

TEST(EnvoyRlsTest, ShadowModeDecidesCountsAndNeverDenies) {
  REQUIRE_CLIENT();
  rls_daemon d(edge_limits, "backend: memory");
  const auto w = request({entry("watch", "w1")});
  auto r = d.call({w, w, w});
  for (const auto& c : r) EXPECT_EQ(c.at("response").at("overall_code"), "OK") << r.dump();
  EXPECT_EQ(r[2].at("response").at("statuses").at(0).at("current_limit").at("name"), "watcher");
  EXPECT_EQ(remaining(r[2].at("response").at("statuses").at(0)), 0u);
  // A shadow limit denying beside a real one that allows: still OK.
  auto mixed = d.call_one(request({entry("watch", "w1"), entry("tenant", "shadow-t")}));
  EXPECT_EQ(mixed.at("response").at("overall_code"), "OK");
  const auto text = http_request(d.sluiced().port(), "GET", "/metrics").body;
  EXPECT_TRUE(has_line(
      text,
      R"(ratelimit_service_rate_limit_shadow_mode_total{descriptor="edge.watch",domain="edge"} 3)"))
      << text;
  EXPECT_TRUE(has_line(
      text,
      R"(ratelimit_service_rate_limit_total_hits_total{descriptor="edge.watch",domain="edge"} 4)"));
  EXPECT_TRUE(has_line(
      text,
      R"(ratelimit_service_rate_limit_within_limit_total{descriptor="edge.watch",domain="edge"} 1)"));
}

TEST(EnvoyRlsTest, RedisDownAnswersUnavailableWithinTheTimeout) {
  REQUIRE_CLIENT();
  redis_server redis;
  const std::string backend =
      "backend: " + redis.url() + "\nbackend_timeout_ms: 100\nbackend_connect_timeout_ms: 100\n";
  rls_daemon d(edge_limits, backend);
  rls_daemon open(edge_limits, backend, "open");
  const auto req = request({entry("tenant", "down")});
  EXPECT_EQ(d.call_one(req).at("response").at("overall_code"), "OK");
  redis.kill();
  for (int i = 0; i < 5; ++i) {
    auto r = d.call_one(req);
    EXPECT_EQ(r.at("code"), "UNAVAILABLE") << r.dump();
    // The backend timeout (100 ms) plus scheduling slack on a loaded machine; nothing waits
    // for TCP retransmits, nothing hangs until the client's own deadline.
    EXPECT_LT(r.at("ms").get<double>(), 1000.0) << r.dump();
    auto o = open.call_one(req);
    EXPECT_EQ(o.at("code"), "OK") << o.dump();
    EXPECT_EQ(o.at("response").at("overall_code"), "OK");
  }
  const auto text = http_request(d.sluiced().port(), "GET", "/metrics").body;
  EXPECT_NE(
      text.find(R"(ratelimit_service_call_should_rate_limit_redis_error_total{domain="edge"} 5)"),
      std::string::npos)
      << text;
  redis.start();
  // Recovered without a restart of sluiced.
  std::optional<json> last;
  for (int i = 0; i < 50; ++i) {
    last = d.call_one(req);
    if (last->at("code") == "OK") break;
    std::this_thread::sleep_for(milliseconds{100});
  }
  EXPECT_EQ(last->at("code"), "OK") << last->dump();
}

TEST(EnvoyRlsTest, ReloadAppliesNewLimitsAndAnInvalidSetKeepsTheOld) {
  REQUIRE_CLIENT();
  rls_daemon d(
      "domain: edge\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: "
      "1}\n",
      "backend: memory");
  const auto req = request({entry("k", "v")});
  auto r = d.call({req, req});
  EXPECT_EQ(r[1].at("response").at("overall_code"), "OVER_LIMIT");

  d.write_limits(
      "domain: edge\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: "
      "4}\n");
  ASSERT_TRUE(d.sluiced().reload());
  // The same bucket (same algorithm and window), now with room for 4: 1 spent, 3 left.
  auto after = d.call_one(req);
  EXPECT_EQ(after.at("response").at("overall_code"), "OK") << after.dump();
  EXPECT_EQ(remaining(after.at("response").at("statuses").at(0)), 2u);

  d.write_limits("domain: edge\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight}\n");
  EXPECT_FALSE(d.sluiced().reload());
  EXPECT_NE(d.sluiced().process().stderr_text().find("limits.yaml:"), std::string::npos);
  auto kept = d.call_one(req);
  EXPECT_EQ(kept.at("response").at("overall_code"), "OK") << kept.dump();
  EXPECT_EQ(remaining(kept.at("response").at("statuses").at(0)), 1u);
}

TEST(EnvoyRlsTest, HealthServiceAnswersServingAndSigtermExitsCleanly) {
  REQUIRE_CLIENT();
  rls_daemon d(edge_limits, "backend: memory");
  EXPECT_EQ(d.client({"health"}).at("status"), "SERVING");
  EXPECT_EQ(d.client({"health", "envoy.service.ratelimit.v3.RateLimitService"}).at("status"),
            "SERVING");
  EXPECT_EQ(d.client({"health", "no.such.Service"}).at("code"), "NOT_FOUND");
  // SIGTERM ends the gRPC listener with the rest: a clean exit, promptly.
  d.sluiced().process().signal(SIGTERM);
  EXPECT_EQ(d.sluiced().process().wait(std::chrono::seconds{10}), 0);
}

TEST(EnvoyRlsTest, InvalidRequestsAreRefusedAsTheReferenceRefusesThem) {
  REQUIRE_CLIENT();
  rls_daemon d(edge_limits, "backend: memory");
  auto r = d.call({R"({"domain":"","descriptors":[{"entries":[{"key":"k","value":"v"}]}]})",
                   R"({"domain":"edge"})"});
  EXPECT_EQ(r[0].at("code"), "INVALID_ARGUMENT");
  EXPECT_EQ(r[0].at("details"), "rate limit domain must not be empty");
  EXPECT_EQ(r[1].at("code"), "INVALID_ARGUMENT");
  // An unknown domain matches nothing: OK.
  EXPECT_EQ(
      d.call_one(request({entry("tenant", "x")}, 0, "elsewhere")).at("response").at("overall_code"),
      "OK");
}

// Bytes that are no RateLimitRequest, or a mutated one: every call is answered, and sluiced
// decides exactly afterwards.
TEST(EnvoyRlsTest, GarbageRequestsAreAnsweredAndNeverFatal) {
  REQUIRE_CLIENT();
  rls_daemon d(edge_limits, "backend: memory");
  auto out = d.client({"garbage", "--count", "400", "--seed", "7"});
  int total = 0;
  for (const auto& [code, n] : out.at("codes").items()) {
    total += n.get<int>();
    // gRPC's callback API answers a request it cannot parse UNIMPLEMENTED itself; what
    // parses is decided (OK) or refused as the reference refuses it (INVALID_ARGUMENT).
    EXPECT_TRUE(code == "OK" || code == "INVALID_ARGUMENT" || code == "UNIMPLEMENTED")
        << out.dump();
  }
  EXPECT_EQ(total, 400);
  EXPECT_TRUE(d.sluiced().process().running());
  auto r = d.call_one(request({entry("tenant", "after-garbage")}));
  EXPECT_EQ(remaining(r.at("response").at("statuses").at(0)), 4u) << r.dump();
}

TEST(EnvoyRlsTest, JsonEndpointAnswers200Or429AndRefusesBadBodies) {
  REQUIRE_CLIENT();
  rls_daemon d(edge_limits, "backend: memory");
  const header_list ct{{"Content-Type", "application/json"}};
  const auto body = request({entry("plan", "free")});
  const auto port = d.sluiced().port();
  auto a = http_request(port, "POST", "/json", body, ct);
  auto b = http_request(port, "POST", "/json", body, ct);
  auto c = http_request(port, "POST", "/json", body, ct);
  EXPECT_EQ(a.status, 200);
  EXPECT_EQ(json::parse(a.body).at("overallCode"), "OK");
  EXPECT_EQ(json::parse(a.body).at("statuses").at(0).at("limitRemaining"), 1);
  EXPECT_EQ(b.status, 200);
  EXPECT_EQ(c.status, 429);
  EXPECT_EQ(json::parse(c.body).at("overallCode"), "OVER_LIMIT");
  for (const std::string bad : {"{", "[]", R"({"domain":"edge","nope":1})", "\xff\xfe",
                                R"({"domain":"edge","descriptors":[{"entries":"x"}]})"}) {
    auto r = http_request(port, "POST", "/json", bad, ct);
    EXPECT_EQ(r.status, 400) << bad;
    EXPECT_EQ(json::parse(r.body).at("error"), "invalid_request");
  }
  EXPECT_EQ(http_request(port, "POST", "/json", body).status, 415);
  EXPECT_EQ(http_request(port, "GET", "/json").status, 405);
  // The same limits are what gRPC sees.
  EXPECT_EQ(d.call_one(body).at("response").at("overall_code"), "OVER_LIMIT");
}

TEST(EnvoyRlsTest, GlobalShadowModeAnswersOkButDecidesAndCounts) {
  REQUIRE_CLIENT();
  rls_daemon d(edge_limits, "backend: memory", "unavailable", "  shadow_mode: true\n");
  const auto both = request({entry("tenant", "gs"), entry("plan", "free")});
  auto r = d.call({both, both, both});
  for (const auto& c : r) EXPECT_EQ(c.at("response").at("overall_code"), "OK") << r.dump();
  // The third would be denied: its status says so, and all-or-nothing still spent nothing.
  const auto& st = r[2].at("response").at("statuses");
  EXPECT_EQ(st.at(1).at("code"), "OVER_LIMIT") << r.dump();
  EXPECT_EQ(st.at(0).value("code", "OK"), "OK") << r.dump();
  EXPECT_EQ(remaining(st.at(0)), 3u) << r.dump();
  const auto port = d.sluiced().port();
  auto j = http_request(port, "POST", "/json", both, {{"Content-Type", "application/json"}});
  EXPECT_EQ(j.status, 200);
  EXPECT_EQ(json::parse(j.body).at("overallCode"), "OK");
  const auto text = http_request(port, "GET", "/metrics").body;
  EXPECT_TRUE(has_line(text, "ratelimit_service_global_shadow_mode_total 2")) << text;
  EXPECT_TRUE(has_line(
      text,
      R"(ratelimit_service_rate_limit_shadow_mode_total{descriptor="edge.plan_free",domain="edge"} 2)"))
      << text;
  EXPECT_TRUE(has_line(
      text,
      R"(ratelimit_service_rate_limit_over_limit_total{descriptor="edge.plan_free",domain="edge"} 2)"));
}

// The headers as a client of Envoy sees them: response_headers_to_add, decoded by
// python3-grpcio's own protobuf from sluiced's bytes.
TEST(EnvoyRlsTest, ResponseHeadersDescribeTheDescriptorClosestToItsLimit) {
  REQUIRE_CLIENT();
  auto headers = [](const json& call) {
    std::map<std::string, std::string> out;
    for (const auto& h : call.at("response").value("response_headers_to_add", json::array()))
      out[h.at("key")] = h.value("value", "");
    return out;
  };
  {
    rls_daemon off(edge_limits, "backend: memory");
    EXPECT_TRUE(headers(off.call_one(request({entry("plan", "free")}))).empty());
  }
  rls_daemon d(edge_limits, "backend: memory", "unavailable", "  response_headers: true\n");
  const auto both = request({entry("tenant", "h"), entry("plan", "free")});
  auto r = d.call({both, both, both});
  auto first = headers(r[0]);
  EXPECT_EQ(first["RateLimit-Limit"], "2") << r.dump();  // plan: 1 left of 2, tenant 4 of 5
  EXPECT_EQ(first["RateLimit-Remaining"], "1");
  const auto reset = std::stoi(first["RateLimit-Reset"]);
  EXPECT_GE(reset, 1);
  EXPECT_LE(reset, 3600);
  auto denied = headers(r[2]);
  EXPECT_EQ(denied["RateLimit-Limit"], "2") << r.dump();
  EXPECT_EQ(denied["RateLimit-Remaining"], "0");
  // No limit applies (unlimited): no headers, as the reference.
  EXPECT_TRUE(headers(d.call_one(request({entry("user", "vip1")}))).empty());

  rls_daemon named(edge_limits, "backend: memory", "unavailable",
                   "  response_headers: {limit: X-Limit, remaining: X-Left, reset: X-Reset}\n");
  auto n = headers(named.call_one(request({entry("tenant", "h")})));
  EXPECT_EQ(n.size(), 3u);
  EXPECT_EQ(n["X-Limit"], "5");
  EXPECT_EQ(n["X-Left"], "4");
  EXPECT_EQ(n.count("X-Reset"), 1u);
}

// Certificates made by `openssl` now (support/test_pki): a TLS client that trusts the CA is
// answered, a plaintext one is not; with client_ca_file a client needs a certificate too.
TEST(EnvoyRlsTest, TlsListenerServesTlsClientsAndMutualTlsRequiresACertificate) {
  REQUIRE_CLIENT();
  test_pki pki;
  const auto tls =
      "  tls:\n    cert_file: " + pki.server_cert() + "\n    key_file: " + pki.server_key() + "\n";
  const auto req = request({entry("tenant", "tls")});
  const std::vector<std::string> call{"call", req};
  {
    rls_daemon d(edge_limits, "backend: memory", "unavailable", tls);
    EXPECT_NE(d.sluiced().process().stderr_text().find(", TLS)"), std::string::npos);
    auto ok = d.client(call, 5000, {"--ca", pki.ca()}).at(0);
    EXPECT_EQ(ok.at("code"), "OK") << ok.dump();
    EXPECT_EQ(ok.at("response").at("overall_code"), "OK");
    auto plain = d.client(call, 2000).at(0);
    EXPECT_EQ(plain.at("code"), "UNAVAILABLE") << plain.dump();
    // A CA that did not sign the server's certificate: refused too.
    auto other = d.client(call, 2000, {"--ca", pki.other_ca()}).at(0);
    EXPECT_EQ(other.at("code"), "UNAVAILABLE") << other.dump();
  }
  rls_daemon m(edge_limits, "backend: memory", "unavailable",
               tls + "    client_ca_file: " + pki.ca() + "\n");
  EXPECT_NE(m.sluiced().process().stderr_text().find(", mutual TLS)"), std::string::npos);
  auto anonymous = m.client(call, 2000, {"--ca", pki.ca()}).at(0);
  EXPECT_EQ(anonymous.at("code"), "UNAVAILABLE") << anonymous.dump();
  auto known = m.client(call, 5000,
                        {"--ca", pki.ca(), "--cert", pki.client_cert(), "--key", pki.client_key()})
                   .at(0);
  EXPECT_EQ(known.at("code"), "OK") << known.dump();
  EXPECT_EQ(remaining(known.at("response").at("statuses").at(0)), 4u) << known.dump();
}

// Polls `ok` until it holds or `within` passes; whether it held.
template <class F>
bool eventually(F ok, std::chrono::seconds within = std::chrono::seconds{20}) {
  const auto deadline = std::chrono::steady_clock::now() + within;
  while (std::chrono::steady_clock::now() < deadline) {
    if (ok()) return true;
    std::this_thread::sleep_for(milliseconds{100});
  }
  return ok();
}

// The upstream headers (request_headers_to_add), the per-unit response headers and quota
// mode as python3-grpcio decodes sluiced's answer.
TEST(EnvoyRlsTest, RequestHeadersPerUnitHeadersAndQuotaModeOverGrpc) {
  REQUIRE_CLIENT();
  const std::string limits = std::string(edge_limits) + R"(  - key: q1
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: q2
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
)";
  rls_daemon d(limits, "backend: memory", "unavailable",
               "  request_headers: {limit: X-Up-Limit, remaining: X-Up-Left, reset: X-Up-Reset}\n"
               "  per_unit_headers: true\n");
  auto list = [](const json& call, const char* field) {
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& h : call.at("response").value(field, json::array()))
      out.emplace_back(h.at("key"), h.value("value", ""));
    return out;
  };
  auto r = d.call_one(request({entry("tenant", "g"), entry("plan", "free"), entry("q1", "x")}));
  ASSERT_EQ(r.at("code"), "OK") << r.dump();
  // The status with the least room: q1 (0 of 1 left, per minute).
  const auto up = list(r, "request_headers_to_add");
  ASSERT_EQ(up.size(), 3u) << r.dump();
  EXPECT_EQ(up[0], (std::pair<std::string, std::string>{"X-Up-Limit", "1"}));
  EXPECT_EQ(up[1], (std::pair<std::string, std::string>{"X-Up-Left", "0"}));
  EXPECT_EQ(up[2].first, "X-Up-Reset");
  const auto down = list(r, "response_headers_to_add");
  const std::vector<std::pair<std::string, std::string>> per_unit{
      {"RateLimit-Limit-Hours", "2"},  // plan: 1 of 2 left, tenant 4 of 5
      {"RateLimit-Remaining-Hours", "1"},
      {"RateLimit-Limit-Minutes", "1"},
      {"RateLimit-Remaining-Minutes", "0"}};
  EXPECT_EQ(down, per_unit) << r.dump();

  // q1=x is over, q2=x is not: one quota group of two over, so OK, q1's status OVER_LIMIT.
  auto soft = d.call_one(request({entry("q1", "x"), entry("q2", "x")}));
  EXPECT_EQ(soft.at("response").at("overall_code"), "OK") << soft.dump();
  EXPECT_EQ(soft.at("response").at("statuses").at(0).at("code"), "OVER_LIMIT");
  auto hard = d.call_one(request({entry("q1", "x"), entry("q2", "x")}));
  EXPECT_EQ(hard.at("response").at("overall_code"), "OVER_LIMIT") << hard.dump();
}

// The certificate in force changes with SIGHUP (new files named in the config) at once, and
// with the files rewritten in place within the watcher's 2 s; a broken file keeps the old
// one and says so in the log.
TEST(EnvoyRlsTest, TlsCertificatesAreReloadedOnSighupAndWhenTheFilesChange) {
  REQUIRE_CLIENT();
  test_pki pki;
  namespace fs = std::filesystem;
  const auto other = pki.make_cert("other", "/CN=localhost",
                                   "subjectAltName=DNS:localhost,IP:127.0.0.1\n"
                                   "extendedKeyUsage=serverAuth\n",
                                   "other-ca");
  const auto dir = make_temp_dir("sluice-rls-certs");
  auto install = [&](const std::string& from, const std::string& to) {
    for (const char* ext : {".key", ".crt"}) {
      fs::copy_file(from + ext, dir + "/" + to + ext + ".tmp",
                    fs::copy_options::overwrite_existing);
      fs::rename(dir + "/" + to + ext + ".tmp", dir + "/" + to + ext);
    }
  };
  install(pki.dir() + "/server", "a");
  install(other, "b");
  auto tls = [&](const std::string& name) {
    return "  tls:\n    cert_file: " + dir + "/" + name + ".crt\n    key_file: " + dir + "/" +
           name + ".key\n";
  };
  rls_daemon d(edge_limits, "backend: memory", "unavailable", tls("a"));
  const std::vector<std::string> call{"call", request({entry("tenant", "rotate")})};
  auto answered_trusting = [&](const std::string& ca) {
    return d.client(call, 2000, {"--ca", ca}).at(0).at("code") == "OK";
  };
  EXPECT_TRUE(answered_trusting(pki.ca()));
  EXPECT_FALSE(answered_trusting(pki.other_ca()));

  // SIGHUP with the config naming b: in force as soon as the reload is.
  d.rewrite(tls("b"));
  ASSERT_TRUE(d.sluiced().reload());
  EXPECT_TRUE(answered_trusting(pki.other_ca()));
  EXPECT_FALSE(answered_trusting(pki.ca()));
  EXPECT_NE(d.sluiced().process().stderr_text().find("reload: envoy_rls.tls in force"),
            std::string::npos);

  // b's files rewritten in place with the first certificate: picked up without a signal.
  install(pki.dir() + "/server", "b");
  EXPECT_TRUE(eventually([&] { return answered_trusting(pki.ca()); }));
  EXPECT_FALSE(answered_trusting(pki.other_ca()));
  EXPECT_NE(d.sluiced().process().stderr_text().find("envoy_rls.tls: files changed"),
            std::string::npos);

  // A broken certificate file: logged, and the one in force keeps serving.
  {
    std::ofstream(dir + "/b.crt.tmp") << "not a certificate\n";
    fs::rename(dir + "/b.crt.tmp", dir + "/b.crt");
  }
  EXPECT_TRUE(eventually([&] {
    return d.sluiced().process().stderr_text().find("holds no PEM certificate") !=
           std::string::npos;
  })) << d.sluiced().process().stderr_text();
  EXPECT_TRUE(answered_trusting(pki.ca()));
  std::error_code ignored;
  fs::remove_all(dir, ignored);
}

// As the reference's GRPC_CLIENT_TLS_SAN: with client_san the verified client certificate
// must carry that name (a URI such as a SPIFFE ID, or a DNS name), else no call is served.
TEST(EnvoyRlsTest, ClientSanRefusesCertificatesWithoutTheName) {
  REQUIRE_CLIENT();
  test_pki pki;
  const auto spiffe = pki.make_cert("envoy", "/CN=envoy",
                                    "subjectAltName=URI:spiffe://sluice.test/envoy\n"
                                    "extendedKeyUsage=clientAuth\n");
  const auto dns = pki.make_cert("envoy-dns", "/CN=envoy",
                                 "subjectAltName=DNS:envoy.sluice.test\n"
                                 "extendedKeyUsage=clientAuth\n");
  const auto mtls = "  tls:\n    cert_file: " + pki.server_cert() +
                    "\n    key_file: " + pki.server_key() + "\n    client_ca_file: " + pki.ca() +
                    "\n";
  const std::vector<std::string> call{"call", request({entry("tenant", "san")})};
  auto code_with = [&](rls_daemon& d, const std::string& cert, const std::string& key) {
    return d.client(call, 2000, {"--ca", pki.ca(), "--cert", cert, "--key", key})
        .at(0)
        .at("code")
        .get<std::string>();
  };
  rls_daemon uri(edge_limits, "backend: memory", "unavailable",
                 mtls + "    client_san: spiffe://sluice.test/envoy\n");
  EXPECT_EQ(code_with(uri, spiffe + ".crt", spiffe + ".key"), "OK");
  // Signed by the CA, but without the name: refused.
  EXPECT_EQ(code_with(uri, pki.client_cert(), pki.client_key()), "UNAVAILABLE");
  EXPECT_EQ(code_with(uri, dns + ".crt", dns + ".key"), "UNAVAILABLE");

  rls_daemon host(edge_limits, "backend: memory", "unavailable",
                  mtls + "    client_san: envoy.sluice.test\n");
  EXPECT_EQ(code_with(host, dns + ".crt", dns + ".key"), "OK");
  EXPECT_EQ(code_with(host, spiffe + ".crt", spiffe + ".key"), "UNAVAILABLE");
}

TEST(EnvoyRlsTest, CheckConfigLoadsTheLimitsFiles) {
  const auto dir = make_temp_dir("sluice-rls-check");
  {
    std::ofstream(dir + "/limits.yaml") << "domain: edge\ndescriptors:\n  - key: a\n  - key: a\n";
    std::ofstream(dir + "/sluiced.yaml")
        << "policies: {api: {capacity: 5, refill_per_second: 1}}\nenvoy_rls:\n  config: "
           "[limits.yaml]\n";
  }
  process_child p({sluiced_path(), "--config", dir + "/sluiced.yaml", "--check-config"}, "check");
  EXPECT_EQ(p.wait(std::chrono::seconds{30}), 2);
  EXPECT_NE(p.stderr_text().find(dir + "/limits.yaml:"), std::string::npos) << p.stderr_text();
  EXPECT_NE(p.stderr_text().find("envoy_rls.config"), std::string::npos) << p.stderr_text();
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
}

}  // namespace
}  // namespace sluice::test
