// The options of sluiced's Envoy RLS beyond the limits: `shadow_mode` (the reference's
// SHADOW_MODE), `response_headers` (LIMIT_RESPONSE_HEADERS_ENABLED and the header names) and
// `tls` (its files read and checked at load, every error with file, line and field). The
// answers through POST /json on the memory backend; the TLS handshake itself is in the
// integration tests (envoy_rls_test.cpp).
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
  for (const char* line :
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
