// The options of sluiced's Envoy RLS beyond the limits: `shadow_mode` (the reference's
// SHADOW_MODE), `response_headers` (LIMIT_RESPONSE_HEADERS_ENABLED and the header names),
// `request_headers` (LIMIT_REQUEST_HEADERS_ENABLED), `per_unit_headers`
// (LIMIT_PER_UNIT_HEADERS_ENABLED), quota mode (a limit's `quota_mode`, and QUOTA_MODE) and
// `tls` (its files read and checked at load, every error with file, line and field; the
// client names `client_san` checks). The answers through POST /json on the memory backend;
// the TLS handshake itself is in the integration tests (envoy_rls_test.cpp).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <boost/asio/io_context.hpp>
#include <nlohmann/json.hpp>

#include "config.hpp"
#include "pem_file.hpp"
#include "service.hpp"
#include "support/process_child.hpp"
#include "support/service_call.hpp"
#include "support/test_pki.hpp"

namespace sluice::daemon {
namespace {

using json = nlohmann::json;

// A directory holding the limits file and whatever a test puts beside it; removed at the end.
class scratch_dir {
 public:
  scratch_dir() : dir_(test::make_temp_dir("sluice-rls-options")) {
    std::ofstream(dir_ + "/limits.yaml") << R"(domain: edge
descriptors:
  - key: tenant
    rate_limit: {unit: hour, requests_per_unit: 5}
  - key: plan
    value: free
    rate_limit: {unit: hour, requests_per_unit: 2}
  - key: user
    rate_limit: {unlimited: true}
)";
  }
  ~scratch_dir() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  const std::string& path() const { return dir_; }
  // Replaces the limits file.
  void limits(const std::string& yaml) const {
    std::ofstream(dir_ + "/limits.yaml", std::ios::trunc) << yaml;
  }
  // The config file's name: relative paths in it are beside it.
  std::string source() const { return dir_ + "/sluiced.yaml"; }

 private:
  std::string dir_;
};

// A config whose envoy_rls section has `keys` (each line indented by two spaces).
std::string with_keys(const std::string& keys) {
  return "policies: {api: {capacity: 5, refill_per_second: 1}}\nenvoy_rls:\n  config: "
         "limits.yaml\n" +
         keys;
}

std::string error_of(const scratch_dir& dir, const std::string& keys) {
  try {
    parse_config(with_keys(keys), dir.source());
  } catch (const config_error& e) {
    return e.what();
  }
  return "(no error)";
}

std::string entry(const std::string& key, const std::string& value) {
  return R"({"entries":[{"key":")" + key + R"(","value":")" + value + R"("}]})";
}

std::string request(const std::string& a, const std::string& b = "") {
  return R"({"domain":"edge","descriptors":[)" + a + (b.empty() ? "" : "," + b) + "]}";
}

http_response post_json(service& svc, boost::asio::io_context& ioc, const std::string& body) {
  return test::call_service(svc, ioc, "POST", "/json", "10.0.0.1",
                            {{"Content-Type", "application/json"}}, body);
}

std::map<std::string, std::string> headers_of(const json& response) {
  std::map<std::string, std::string> out;
  for (const auto& h : response.value("responseHeadersToAdd", json::array()))
    out[h.at("key")] = h.value("value", "");
  return out;
}

// "12.345s" (the JSON mapping of a Duration) in whole seconds, rounded up.
long long ceil_seconds(const std::string& duration) {
  return static_cast<long long>(std::ceil(std::stod(duration.substr(0, duration.size() - 1))));
}

TEST(DaemonEnvoyRlsOptionsTest, DefaultsAreTheReferences) {
  scratch_dir dir;
  const auto c = parse_config(with_keys(""), dir.source()).envoy_rls;
  EXPECT_FALSE(c.shadow_mode);
  EXPECT_FALSE(c.response_headers.enabled);
  EXPECT_EQ(c.response_headers.limit, "RateLimit-Limit");
  EXPECT_EQ(c.response_headers.remaining, "RateLimit-Remaining");
  EXPECT_EQ(c.response_headers.reset, "RateLimit-Reset");
  EXPECT_FALSE(c.tls.enabled());

  const auto named = parse_config(with_keys("  shadow_mode: true\n  response_headers: {limit: "
                                            "X-Limit, reset: X-Reset}\n"),
                                  dir.source())
                         .envoy_rls;
  EXPECT_TRUE(named.shadow_mode);
  EXPECT_TRUE(named.response_headers.enabled);  // a mapping of names turns them on
  EXPECT_EQ(named.response_headers.limit, "X-Limit");
  EXPECT_EQ(named.response_headers.remaining, "RateLimit-Remaining");
  EXPECT_EQ(named.response_headers.reset, "X-Reset");
}

TEST(DaemonEnvoyRlsOptionsTest, BadShadowModeAndHeadersNameFileLineAndField) {
  scratch_dir dir;
  const auto f = dir.source();
  EXPECT_EQ(error_of(dir, "  shadow_mode: yes\n"),
            f + ":4: envoy_rls.shadow_mode: must be true or false, got \"yes\"");
  EXPECT_EQ(error_of(dir, "  response_headers: 1\n"),
            f + ":4: envoy_rls.response_headers: must be true or false, got \"1\"");
  EXPECT_EQ(error_of(dir, "  response_headers: [a]\n"),
            f + ":4: envoy_rls.response_headers: must be true, false or a mapping of header names "
                "(limit, remaining, reset)");
  EXPECT_EQ(error_of(dir, "  response_headers:\n    limt: X\n"),
            f + ":5: envoy_rls.response_headers.limt: unknown key");
  EXPECT_EQ(error_of(dir, "  response_headers:\n    reset: \"X Reset\"\n"),
            f + ":5: envoy_rls.response_headers.reset: \"X Reset\" is not an HTTP header name");
  EXPECT_EQ(error_of(dir, "  response_headers: {limit: x-a, remaining: X-A}\n"),
            f + ":4: envoy_rls.response_headers: limit, remaining and reset must be three "
                "different header names");
}

// The gRPC listener's bounds: defaults, every key read, and an out-of-range value named
// with file, line and field.
TEST(DaemonEnvoyRlsOptionsTest, TransportLimitsHaveDefaultsAndRanges) {
  scratch_dir dir;
  const auto d = parse_config(with_keys(""), dir.source()).envoy_rls.transport;
  EXPECT_EQ(d.max_connections, 1024u);
  EXPECT_EQ(d.connection.h2.max_concurrent_streams, 100u);
  EXPECT_EQ(d.connection.h2.max_header_list_bytes, 8192u);
  EXPECT_EQ(d.connection.h2.max_continuations, 8u);
  EXPECT_EQ(d.connection.h2.max_message_bytes, 65536u);
  EXPECT_EQ(d.connection.h2.stream_reset_burst, 1000u);
  EXPECT_EQ(d.connection.h2.stream_reset_rate, 33u);
  EXPECT_EQ(d.connection.handshake_timeout, std::chrono::milliseconds{5000});
  EXPECT_EQ(d.connection.idle_timeout, std::chrono::milliseconds{300000});
  EXPECT_EQ(d.connection.h2.request_timeout, std::chrono::milliseconds{10000});
  EXPECT_EQ(d.connection.max_output_bytes, 262144u);

  const auto t = parse_config(with_keys("  max_connections: 50\n  max_concurrent_streams: 10\n"
                                        "  max_header_list_bytes: 4096\n  max_continuations: 2\n"
                                        "  max_message_bytes: 1024\n  stream_reset_burst: 20\n"
                                        "  stream_reset_rate: 5\n  handshake_timeout_ms: 1500\n"
                                        "  idle_timeout_ms: 2500\n  request_timeout_ms: 3500\n"
                                        "  max_output_bytes: 65536\n"),
                              dir.source())
                     .envoy_rls.transport;
  EXPECT_EQ(t.max_connections, 50u);
  EXPECT_EQ(t.connection.h2.max_concurrent_streams, 10u);
  EXPECT_EQ(t.connection.h2.max_header_list_bytes, 4096u);
  EXPECT_EQ(t.connection.h2.max_continuations, 2u);
  EXPECT_EQ(t.connection.h2.max_message_bytes, 1024u);
  EXPECT_EQ(t.connection.h2.stream_reset_burst, 20u);
  EXPECT_EQ(t.connection.h2.stream_reset_rate, 5u);
  EXPECT_EQ(t.connection.handshake_timeout, std::chrono::milliseconds{1500});
  EXPECT_EQ(t.connection.idle_timeout, std::chrono::milliseconds{2500});
  EXPECT_EQ(t.connection.h2.request_timeout, std::chrono::milliseconds{3500});
  EXPECT_EQ(t.connection.max_output_bytes, 65536u);

  const auto f = dir.source();
  EXPECT_EQ(error_of(dir, "  max_concurrent_streams: 0\n"),
            f + ":4: envoy_rls.max_concurrent_streams: must be in 1..10000, got 0");
  EXPECT_EQ(error_of(dir, "  max_message_bytes: 99999999\n"),
            f + ":4: envoy_rls.max_message_bytes: must be in 64..16777216, got 99999999");
  EXPECT_EQ(error_of(dir, "  handshake_timeout_ms: 5s\n"),
            f + ":4: envoy_rls.handshake_timeout_ms: must be an integer, got \"5s\"");
  EXPECT_EQ(error_of(dir, "  max_header_list_bytes: 100\n"),
            f + ":4: envoy_rls.max_header_list_bytes: must be in 1024..1048576, got 100");
  EXPECT_EQ(error_of(dir, "  stream_reset_rate: 0\n"),
            f + ":4: envoy_rls.stream_reset_rate: must be in 1..1000000, got 0");
}

TEST(DaemonEnvoyRlsOptionsTest, TlsFilesAreReadBesideTheConfigAndChecked) {
  scratch_dir dir;
  test::test_pki pki;
  namespace fs = std::filesystem;
  fs::copy_file(pki.server_cert(), dir.path() + "/server.crt");
  fs::copy_file(pki.server_key(), dir.path() + "/server.key");
  fs::copy_file(pki.ca(), dir.path() + "/ca.crt");
  const auto f = dir.source();

  const auto c = parse_config(with_keys("  tls:\n    cert_file: server.crt\n    key_file: "
                                        "server.key\n    client_ca_file: ca.crt\n"),
                              f)
                     .envoy_rls.tls;
  ASSERT_TRUE(c.enabled());
  EXPECT_EQ(c.cert_file, "server.crt");  // as written; the contents read from beside it
  EXPECT_NE(c.cert_pem.find("-----BEGIN CERTIFICATE-----"), std::string::npos);
  EXPECT_NE(c.key_pem.find("PRIVATE KEY-----"), std::string::npos);
  EXPECT_NE(c.client_ca_pem.find("-----BEGIN CERTIFICATE-----"), std::string::npos);

  EXPECT_EQ(error_of(dir, "  tls: {cert_file: server.crt}\n"),
            f + ":4: envoy_rls.tls.key_file: is required (the private key of cert_file, PEM)");
  EXPECT_EQ(error_of(dir, "  tls: {key_file: server.key}\n"),
            f + ":4: envoy_rls.tls.cert_file: is required (the server's certificate chain, PEM)");
  EXPECT_EQ(error_of(dir,
                     "  tls:\n    cert_file: server.crt\n    key_file: server.key\n    "
                     "ca_file: ca.crt\n"),
            f + ":7: envoy_rls.tls.ca_file: unknown key");
  EXPECT_EQ(error_of(dir, "  tls: true\n"), f + ":4: envoy_rls.tls: must be a mapping");
  EXPECT_EQ(error_of(dir, "  tls:\n    cert_file: nope.crt\n    key_file: server.key\n"),
            f + ":5: envoy_rls.tls.cert_file: cannot read \"" + dir.path() +
                "/nope.crt\": No such file or directory");
  // A key where the certificate belongs, a certificate where the key belongs, a directory.
  EXPECT_EQ(error_of(dir, "  tls:\n    cert_file: server.key\n    key_file: server.key\n"),
            f + ":5: envoy_rls.tls.cert_file: \"" + dir.path() +
                "/server.key\" holds no PEM certificate");
  EXPECT_EQ(error_of(dir, "  tls:\n    cert_file: server.crt\n    key_file: ca.crt\n"),
            f + ":6: envoy_rls.tls.key_file: \"" + dir.path() +
                "/ca.crt\" holds no unencrypted PEM private key");
  EXPECT_EQ(error_of(dir,
                     "  tls:\n    cert_file: server.crt\n    key_file: server.key\n    "
                     "client_ca_file: .\n"),
            f + ":7: envoy_rls.tls.client_ca_file: \"" + dir.path() + "/.\" is not a regular file");
  // Another key than the certificate's.
  EXPECT_EQ(
      error_of(dir, "  tls:\n    cert_file: server.crt\n    key_file: " + pki.client_key() + "\n"),
      f + ":6: envoy_rls.tls.key_file: is not the private key of cert_file's certificate");
}

TEST(DaemonEnvoyRlsOptionsTest, ShadowModeAnswersOkWhereOverAndCountsAsEver) {
  scratch_dir dir;
  service svc(parse_config(with_keys("  shadow_mode: true\n"), dir.source()), {},
              test::unit_clock());
  boost::asio::io_context ioc;
  const auto both = request(entry("tenant", "t"), entry("plan", "free"));
  for (int i = 0; i < 2; ++i) EXPECT_EQ(post_json(svc, ioc, both).result_int(), 200);
  auto r = post_json(svc, ioc, both);
  EXPECT_EQ(r.result_int(), 200);  // 429 without shadow_mode (DaemonEnvoyRlsTest)
  auto j = json::parse(r.body());
  EXPECT_EQ(j.at("overallCode"), "OK");
  EXPECT_EQ(j.at("statuses").at(1).at("code"), "OVER_LIMIT");
  // Decided as without shadow mode: the request one limit denies spends none of the others.
  EXPECT_EQ(j.at("statuses").at(0).at("limitRemaining"), 3);

  const auto text = test::call_service(svc, ioc, "GET", "/metrics", "10.0.0.1", {}, "").body();
  for (
      const char* line :
      {"ratelimit_service_global_shadow_mode_total 1",
       R"(ratelimit_service_rate_limit_over_limit_total{descriptor="edge.plan_free",domain="edge"} 1)",
       R"(ratelimit_service_rate_limit_shadow_mode_total{descriptor="edge.plan_free",domain="edge"} 1)",
       R"(sluice_rls_calls_total{code="ok",transport="json"} 3)"}) {
    EXPECT_NE(text.find(std::string(line) + "\n"), std::string::npos) << line << "\n" << text;
  }
}

TEST(DaemonEnvoyRlsOptionsTest, ResponseHeadersDescribeTheStatusWithTheLeastLeft) {
  scratch_dir dir;
  boost::asio::io_context ioc;
  {
    service off(parse_config(with_keys(""), dir.source()), {}, test::unit_clock());
    auto j = json::parse(post_json(off, ioc, request(entry("tenant", "t"))).body());
    EXPECT_FALSE(j.contains("responseHeadersToAdd")) << j.dump();
  }
  service svc(parse_config(with_keys("  response_headers: true\n"), dir.source()), {},
              test::unit_clock());
  const auto both = request(entry("tenant", "t"), entry("plan", "free"));
  auto first = json::parse(post_json(svc, ioc, both).body());
  auto h = headers_of(first);
  ASSERT_EQ(h.size(), 3u) << first.dump();
  // tenant has 4 of 5 left, plan 1 of 2: plan's.
  EXPECT_EQ(h["RateLimit-Limit"], "2");
  EXPECT_EQ(h["RateLimit-Remaining"], "1");
  EXPECT_EQ(std::stoll(h["RateLimit-Reset"]),
            ceil_seconds(first.at("statuses").at(1).at("durationUntilReset")));
  // In the order the reference adds them.
  EXPECT_EQ(first.at("responseHeadersToAdd").at(0).at("key"), "RateLimit-Limit");
  EXPECT_EQ(first.at("responseHeadersToAdd").at(2).at("key"), "RateLimit-Reset");

  (void)post_json(svc, ioc, both);
  auto denied = json::parse(post_json(svc, ioc, both).body());
  h = headers_of(denied);
  EXPECT_EQ(h["RateLimit-Limit"], "2") << denied.dump();
  EXPECT_EQ(h["RateLimit-Remaining"], "0");
  EXPECT_GE(std::stoll(h["RateLimit-Reset"]), 1);

  // Listed the other way round: the same status.
  auto mixed =
      json::parse(post_json(svc, ioc, request(entry("plan", "free"), entry("tenant", "t"))).body());
  EXPECT_EQ(headers_of(mixed)["RateLimit-Limit"], "2") << mixed.dump();

  // Nothing with a limit (unlimited, no match): no headers, as the reference.
  auto none = json::parse(post_json(svc, ioc, request(entry("user", "u"), entry("x", "y"))).body());
  EXPECT_FALSE(none.contains("responseHeadersToAdd")) << none.dump();

  service named(
      parse_config(with_keys("  response_headers: {limit: X-L, remaining: X-R, reset: X-Reset}\n"),
                   dir.source()),
      {}, test::unit_clock());
  auto n = headers_of(json::parse(post_json(named, ioc, request(entry("tenant", "n"))).body()));
  EXPECT_EQ(n.size(), 3u);
  EXPECT_EQ(n["X-L"], "5");
  EXPECT_EQ(n["X-R"], "4");
  EXPECT_EQ(n.count("X-Reset"), 1u);
}

}  // namespace
}  // namespace sluice::daemon

namespace sluice::daemon {
namespace {

TEST(DaemonEnvoyRlsOptionsTest, MaxMetricSeriesBoundsDescriptorSeriesFromRequests) {
  scratch_dir dir;
  EXPECT_EQ(parse_config(with_keys(""), dir.source()).envoy_rls.max_metric_series, 10'000u);
  service svc(parse_config(with_keys("  max_metric_series: 2\n"), dir.source()), {},
              test::unit_clock());
  boost::asio::io_context ioc;
  // Each call's own `limit` makes a stat key of its values: an attacker's distinct values.
  const auto with_limit = [](const std::string& value) {
    return R"({"domain":"edge","descriptors":[{"entries":[{"key":"tenant","value":")" + value +
           R"("}],"limit":{"requestsPerUnit":10,"unit":"HOUR"}}]})";
  };
  EXPECT_EQ(post_json(svc, ioc, with_limit(R"(a\u0000\u001b)")).result_int(), 200);
  for (int i = 0; i < 20; ++i)
    EXPECT_EQ(post_json(svc, ioc, with_limit("v" + std::to_string(i))).result_int(), 200);
  const auto text = test::call_service(svc, ioc, "GET", "/metrics", "10.0.0.1", {}, "").body();
  for (
      const char* line :
      {R"(ratelimit_service_rate_limit_total_hits_total{descriptor="edge.tenant_a\\x00\\x1b",domain="edge"} 1)",
       R"(ratelimit_service_rate_limit_total_hits_total{descriptor="edge.tenant_v0",domain="edge"} 1)",
       R"(ratelimit_service_rate_limit_total_hits_total{descriptor="__overflow__",domain="edge"} 19)",
       R"(sluice_metric_series_dropped_total{family="rls_descriptor"} 19)"}) {
    EXPECT_NE(text.find(std::string(line) + "\n"), std::string::npos) << line << "\n" << text;
  }
  EXPECT_EQ(text.find("edge.tenant_v1\""), std::string::npos) << text;
  EXPECT_EQ(text.find('\0'), std::string::npos);
  EXPECT_EQ(text.find('\x1b'), std::string::npos);
}

}  // namespace
}  // namespace sluice::daemon

namespace sluice::daemon {
namespace {

std::map<std::string, std::string> request_headers_of(const json& response) {
  std::map<std::string, std::string> out;
  for (const auto& h : response.value("requestHeadersToAdd", json::array()))
    out[h.at("key")] = h.value("value", "");
  return out;
}

std::string descriptor(const std::vector<std::pair<std::string, std::string>>& entries) {
  std::string s = R"({"entries":[)";
  for (std::size_t i = 0; i < entries.size(); ++i) {
    s += (i ? "," : "") + std::string(R"({"key":")") + entries[i].first + R"(","value":")" +
         entries[i].second + R"("})";
  }
  return s + "]}";
}

std::string request_of(const std::vector<std::string>& descriptors) {
  std::string s = R"({"domain":"edge","descriptors":[)";
  for (std::size_t i = 0; i < descriptors.size(); ++i) s += (i ? "," : "") + descriptors[i];
  return s + "]}";
}

TEST(DaemonEnvoyRlsOptionsTest, NewOptionsParseWithTheReferencesDefaults) {
  scratch_dir dir;
  const auto f = dir.source();
  const auto c = parse_config(with_keys(""), f).envoy_rls;
  EXPECT_FALSE(c.request_headers.enabled);
  EXPECT_EQ(c.request_headers.limit, "RateLimit-Limit");  // LIMIT_REQUEST_LIMIT_HEADER
  EXPECT_EQ(c.request_headers.remaining, "RateLimit-Remaining");
  EXPECT_EQ(c.request_headers.reset, "RateLimit-Reset");
  EXPECT_FALSE(c.per_unit_headers);
  EXPECT_FALSE(c.quota_mode);

  const auto on = parse_config(with_keys("  request_headers: {remaining: X-Left}\n  "
                                         "per_unit_headers: true\n  quota_mode: true\n"),
                               f)
                      .envoy_rls;
  EXPECT_TRUE(on.request_headers.enabled);
  EXPECT_EQ(on.request_headers.remaining, "X-Left");
  EXPECT_EQ(on.request_headers.limit, "RateLimit-Limit");
  EXPECT_FALSE(on.response_headers.enabled);  // the two are independent
  EXPECT_TRUE(on.per_unit_headers);
  EXPECT_TRUE(on.quota_mode);

  EXPECT_EQ(error_of(dir, "  request_headers: [x]\n"),
            f + ":4: envoy_rls.request_headers: must be true, false or a mapping of header names "
                "(limit, remaining, reset)");
  EXPECT_EQ(error_of(dir, "  request_headers: {limit: a, reset: A}\n"),
            f + ":4: envoy_rls.request_headers: limit, remaining and reset must be three "
                "different header names");
  EXPECT_EQ(error_of(dir, "  request_headers: {reset: \"a b\"}\n"),
            f + ":4: envoy_rls.request_headers.reset: \"a b\" is not an HTTP header name");
  EXPECT_EQ(error_of(dir, "  per_unit_headers: maybe\n"),
            f + ":4: envoy_rls.per_unit_headers: must be true or false, got \"maybe\"");
  EXPECT_EQ(error_of(dir, "  quota_mode: 2\n"),
            f + ":4: envoy_rls.quota_mode: must be true or false, got \"2\"");
}

TEST(DaemonEnvoyRlsOptionsTest, RequestHeadersDescribeTheSameStatusForTheUpstream) {
  scratch_dir dir;
  boost::asio::io_context ioc;
  const auto both = request(entry("tenant", "t"), entry("plan", "free"));
  {
    service off(parse_config(with_keys("  response_headers: true\n"), dir.source()), {},
                test::unit_clock());
    auto j = json::parse(post_json(off, ioc, both).body());
    EXPECT_FALSE(j.contains("requestHeadersToAdd")) << j.dump();
  }
  service svc(parse_config(with_keys("  request_headers: true\n"), dir.source()), {},
              test::unit_clock());
  auto first = json::parse(post_json(svc, ioc, both).body());
  EXPECT_FALSE(first.contains("responseHeadersToAdd")) << first.dump();  // not asked for
  auto h = request_headers_of(first);
  ASSERT_EQ(h.size(), 3u) << first.dump();
  // tenant has 4 of 5 left, plan 1 of 2: plan's, as for the response headers.
  EXPECT_EQ(h["RateLimit-Limit"], "2");
  EXPECT_EQ(h["RateLimit-Remaining"], "1");
  EXPECT_EQ(std::stoll(h["RateLimit-Reset"]),
            ceil_seconds(first.at("statuses").at(1).at("durationUntilReset")));
  EXPECT_EQ(first.at("requestHeadersToAdd").at(0).at("key"), "RateLimit-Limit");
  EXPECT_EQ(first.at("requestHeadersToAdd").at(2).at("key"), "RateLimit-Reset");

  // Both on, named apart: each list with its own names, the same values.
  service two(parse_config(with_keys("  response_headers: {limit: X-Down-Limit, remaining: "
                                     "X-Down-Left, reset: X-Down-Reset}\n  request_headers: "
                                     "{limit: X-Up-Limit, remaining: X-Up-Left, reset: "
                                     "X-Up-Reset}\n"),
                           dir.source()),
              {}, test::unit_clock());
  auto j = json::parse(post_json(two, ioc, request(entry("tenant", "u"))).body());
  auto up = request_headers_of(j);
  auto down = headers_of(j);
  EXPECT_EQ(up["X-Up-Limit"], "5") << j.dump();
  EXPECT_EQ(up["X-Up-Left"], "4");
  EXPECT_EQ(down["X-Down-Limit"], "5");
  EXPECT_EQ(down["X-Down-Left"], "4");
  EXPECT_EQ(up["X-Up-Reset"], down["X-Down-Reset"]);
  EXPECT_EQ(up.size(), 3u);
  EXPECT_EQ(down.size(), 3u);

  // Nothing with a limit: none, as the reference.
  auto none = json::parse(post_json(svc, ioc, request(entry("user", "u"))).body());
  EXPECT_FALSE(none.contains("requestHeadersToAdd")) << none.dump();
}

TEST(DaemonEnvoyRlsOptionsTest, PerUnitHeadersGiveEachUnitsLeastRoom) {
  scratch_dir dir;
  dir.limits(R"(domain: edge
descriptors:
  - key: ip
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: org
    rate_limit: {unit: day, requests_per_unit: 100}
  - key: api_key
    rate_limit: {unit: second, requests_per_unit: 5}
  - key: project
    rate_limit: {unit: day, requests_per_unit: 50}
  - key: user
    rate_limit: {unlimited: true}
)");
  boost::asio::io_context ioc;
  service svc(parse_config(with_keys("  per_unit_headers: true\n"), dir.source()), {},
              test::unit_clock());
  auto j =
      json::parse(post_json(svc, ioc,
                            request_of({entry("ip", "a"), entry("org", "o"), entry("api_key", "k"),
                                        entry("project", "p"), entry("user", "u")}))
                      .body());
  // Per unit, in the order the units first appear: the second limits' least room is
  // api_key's (4 of 5), the day limits' project's (49 of 50); the unlimited one has none.
  const auto list = j.at("responseHeadersToAdd");
  ASSERT_EQ(list.size(), 4u) << j.dump();
  const std::vector<std::pair<std::string, std::string>> want{{"RateLimit-Limit-Seconds", "5"},
                                                              {"RateLimit-Remaining-Seconds", "4"},
                                                              {"RateLimit-Limit-Days", "50"},
                                                              {"RateLimit-Remaining-Days", "49"}};
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(list.at(i).at("key"), want[i].first) << j.dump();
    EXPECT_EQ(list.at(i).at("value"), want[i].second) << j.dump();
  }
  EXPECT_FALSE(j.contains("requestHeadersToAdd"));

  // With response_headers too: the per-unit ones first, then the three of the one status.
  service both(
      parse_config(with_keys("  per_unit_headers: true\n  response_headers: true\n"), dir.source()),
      {}, test::unit_clock());
  auto k =
      json::parse(post_json(both, ioc, request_of({entry("ip", "b"), entry("org", "b")})).body());
  const auto all = k.at("responseHeadersToAdd");
  ASSERT_EQ(all.size(), 7u) << k.dump();
  EXPECT_EQ(all.at(0).at("key"), "RateLimit-Limit-Seconds");
  EXPECT_EQ(all.at(2).at("key"), "RateLimit-Limit-Days");
  EXPECT_EQ(all.at(4).at("key"), "RateLimit-Limit");
  EXPECT_EQ(all.at(4).at("value"), "10");  // ip: 9 of 10 left, org 99 of 100
  EXPECT_EQ(all.at(5).at("value"), "9");
}

// The reference's quota mode: quota limits are grouped (by backend_name and
// model_name_override when the descriptor has them, else by all its entries); the request
// is over when a limit outside quota mode is, or when every quota group is.
TEST(DaemonEnvoyRlsOptionsTest, QuotaModeDeniesOnlyWhenEveryQuotaGroupIsOver) {
  scratch_dir dir;
  dir.limits(R"(domain: edge
descriptors:
  - key: q1
    quota_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: q2
    quota_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: hard
    rate_limit: {unit: hour, requests_per_unit: 5}
  - key: backend_name
    descriptors:
      - key: model_name_override
        descriptors:
          - key: bucket
            quota_mode: true
            rate_limit: {unit: hour, requests_per_unit: 1}
)");
  boost::asio::io_context ioc;
  service svc(parse_config(with_keys(""), dir.source()), {}, test::unit_clock());
  auto call = [&](const std::vector<std::string>& ds) {
    auto r = post_json(svc, ioc, request_of(ds));
    auto j = json::parse(r.body());
    j["http"] = r.result_int();
    return j;
  };
  auto code = [](const json& j, std::size_t i) { return j.at("statuses").at(i).at("code"); };

  auto first = call({entry("q1", "a"), entry("q2", "a")});
  EXPECT_EQ(first.at("overallCode"), "OK") << first.dump();
  // q1=a is spent; q2=b is fresh: one group of two over, so the request is allowed, and
  // the over one says so in its status (q1=a is counted, as the reference counts it).
  auto some = call({entry("q1", "a"), entry("q2", "b")});
  EXPECT_EQ(some.at("overallCode"), "OK") << some.dump();
  EXPECT_EQ(some.at("http"), 200);
  EXPECT_EQ(code(some, 0), "OVER_LIMIT");
  EXPECT_EQ(code(some, 1), "OK");
  // Every group over: denied.
  auto all = call({entry("q1", "a"), entry("q2", "a")});
  EXPECT_EQ(all.at("overallCode"), "OVER_LIMIT") << all.dump();
  EXPECT_EQ(all.at("http"), 429);

  // A limit outside quota mode over: denied whatever the quota groups say.
  for (int i = 0; i < 5; ++i) (void)call({entry("hard", "x")});
  auto hard = call({entry("hard", "x"), entry("q1", "fresh")});
  EXPECT_EQ(hard.at("overallCode"), "OVER_LIMIT") << hard.dump();
  EXPECT_EQ(code(hard, 1), "OK");

  // The only quota group over denies the request, and the request's other limits spend
  // nothing: decided after the quota ones.
  auto mixed = call({entry("hard", "y"), entry("q2", "c")});
  EXPECT_EQ(mixed.at("overallCode"), "OK") << mixed.dump();
  EXPECT_EQ(mixed.at("statuses").at(0).at("limitRemaining"), 4);
  auto denied = call({entry("hard", "y"), entry("q2", "c")});
  EXPECT_EQ(denied.at("overallCode"), "OVER_LIMIT") << denied.dump();
  EXPECT_EQ(code(denied, 0), "OK");
  EXPECT_EQ(code(denied, 1), "OVER_LIMIT");
  auto after = call({entry("hard", "y")});
  EXPECT_EQ(after.at("statuses").at(0).at("limitRemaining"), 3) << after.dump();  // not 2

  // Groups by model: model A's tenant bucket and default bucket are one group, model B's
  // another.
  const auto a_tenant =
      descriptor({{"backend_name", "ns/be"}, {"model_name_override", "a"}, {"bucket", "tenant"}});
  const auto a_default =
      descriptor({{"backend_name", "ns/be"}, {"model_name_override", "a"}, {"bucket", "default"}});
  const auto a_fresh =
      descriptor({{"backend_name", "ns/be"}, {"model_name_override", "a"}, {"bucket", "fresh"}});
  const auto b_default =
      descriptor({{"backend_name", "ns/be"}, {"model_name_override", "b"}, {"bucket", "default"}});
  EXPECT_EQ(call({a_tenant}).at("overallCode"), "OK");
  // Model A's group is over (its tenant bucket) though its fresh bucket has room: with
  // model A alone the request is denied; with model B beside it, B takes it.
  auto a_only = call({a_tenant, a_fresh});
  EXPECT_EQ(a_only.at("overallCode"), "OVER_LIMIT") << a_only.dump();
  EXPECT_EQ(code(a_only, 1), "OK");
  auto failover = call({a_tenant, a_default, b_default});
  EXPECT_EQ(failover.at("overallCode"), "OK") << failover.dump();
  EXPECT_EQ(code(failover, 0), "OVER_LIMIT");
  auto both_over = call({a_tenant, b_default});
  EXPECT_EQ(both_over.at("overallCode"), "OVER_LIMIT") << both_over.dump();
}

TEST(DaemonEnvoyRlsOptionsTest, ServiceQuotaModePutsEveryDescriptorInQuotaMode) {
  scratch_dir dir;
  boost::asio::io_context ioc;
  service svc(parse_config(with_keys("  quota_mode: true\n"), dir.source()), {},
              test::unit_clock());
  const auto both = request(entry("tenant", "t"), entry("plan", "free"));
  for (int i = 0; i < 2; ++i) EXPECT_EQ(post_json(svc, ioc, both).result_int(), 200);
  // plan=free is over, tenant=t is not: one group of two, so allowed (429 without it).
  auto r = post_json(svc, ioc, both);
  auto j = json::parse(r.body());
  EXPECT_EQ(r.result_int(), 200) << j.dump();
  EXPECT_EQ(j.at("statuses").at(1).at("code"), "OVER_LIMIT");
  // A descriptor no limit matches is a group that is never over, as the reference's.
  auto unmatched = post_json(svc, ioc, request(entry("plan", "free"), entry("nothing", "x")));
  EXPECT_EQ(unmatched.result_int(), 200) << unmatched.body();
  auto alone = post_json(svc, ioc, request(entry("plan", "free")));
  EXPECT_EQ(alone.result_int(), 429) << alone.body();
}

TEST(DaemonEnvoyRlsOptionsTest, ClientSanNeedsClientCaAndMatchesTheCertificatesNames) {
  scratch_dir dir;
  test::test_pki pki;
  namespace fs = std::filesystem;
  fs::copy_file(pki.server_cert(), dir.path() + "/server.crt");
  fs::copy_file(pki.server_key(), dir.path() + "/server.key");
  fs::copy_file(pki.ca(), dir.path() + "/ca.crt");
  const auto f = dir.source();
  const std::string tls = "  tls:\n    cert_file: server.crt\n    key_file: server.key\n";
  const auto c = parse_config(with_keys(tls + "    client_ca_file: ca.crt\n    client_san: "
                                              "spiffe://sluice.test/envoy\n"),
                              f)
                     .envoy_rls.tls;
  EXPECT_EQ(c.client_san, "spiffe://sluice.test/envoy");
  EXPECT_EQ(c.cert_path, dir.path() + "/server.crt");  // resolved beside the config
  EXPECT_EQ(error_of(dir, tls + "    client_san: envoy.test\n"),
            f + ":7: envoy_rls.tls.client_san: needs client_ca_file (mutual TLS)");
  EXPECT_EQ(error_of(dir, tls + "    client_ca_file: ca.crt\n    client_san: \"\"\n"),
            f + ":8: envoy_rls.tls.client_san: must not be empty");

  auto read = [](const std::string& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  // The server certificate: DNS:localhost, IP:127.0.0.1, CN=localhost.
  const auto server = read(pki.server_cert());
  EXPECT_TRUE(pem_certificate_has_san(server, "localhost"));
  EXPECT_TRUE(pem_certificate_has_san(server, "127.0.0.1"));
  EXPECT_FALSE(pem_certificate_has_san(server, "127.0.0.2"));
  EXPECT_FALSE(pem_certificate_has_san(server, "other.test"));
  EXPECT_FALSE(pem_certificate_has_san(server, "spiffe://localhost"));
  // No subject alternative names: its common name does not count.
  const auto client = read(pki.client_cert());
  EXPECT_FALSE(pem_certificate_has_san(client, "sluice test client"));
  const auto spiffe = read(pki.make_cert("spiffe", "/CN=envoy",
                                         "subjectAltName=URI:spiffe://sluice.test/envoy,"
                                         "DNS:*.clients.test\nextendedKeyUsage=clientAuth\n") +
                           ".crt");
  EXPECT_TRUE(pem_certificate_has_san(spiffe, "spiffe://sluice.test/envoy"));
  EXPECT_FALSE(pem_certificate_has_san(spiffe, "spiffe://sluice.test/envoy2"));
  EXPECT_FALSE(pem_certificate_has_san(spiffe, "spiffe://sluice.test"));
  EXPECT_TRUE(pem_certificate_has_san(spiffe, "a.clients.test"));  // the wildcard: one label
  EXPECT_FALSE(pem_certificate_has_san(spiffe, "b.a.clients.test"));
  EXPECT_FALSE(pem_certificate_has_san(spiffe, "envoy"));
  EXPECT_FALSE(pem_certificate_has_san("not a certificate", "localhost"));
}

}  // namespace
}  // namespace sluice::daemon
