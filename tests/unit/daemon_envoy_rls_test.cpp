// sluiced's Envoy RLS without sockets: the `envoy_rls` config section (every key, every
// error with file and line), the .proto transcription's names and field numbers (what makes
// an unmodified Envoy talk to sluiced), and decisions through POST /json on the memory
// backend (all-or-nothing, peeks, shadow mode, metrics).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <boost/asio/io_context.hpp>
#include <nlohmann/json.hpp>

#include <sluice/error.hpp>

#include "config.hpp"
#include "envoy/extensions/common/ratelimit/v3/ratelimit.pb.h"
#include "envoy/rls_config.hpp"
#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "envoy/service/ratelimit/v3/rls.pb.h"
#include "envoy_rls.hpp"
#include "service.hpp"
#include "support/process_child.hpp"
#include "support/service_call.hpp"

namespace sluice::daemon {
namespace {

using json = nlohmann::json;
namespace pb = ::envoy::service::ratelimit::v3;
namespace common = ::envoy::extensions::common::ratelimit::v3;

constexpr const char* limits_yaml = R"(domain: edge
descriptors:
  - key: tenant
    rate_limit: {unit: hour, requests_per_unit: 5}
  - key: plan
    value: free
    rate_limit: {unit: hour, requests_per_unit: 2}
  - key: watch
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
)";

// A directory holding limits.yaml; removed at the end.
class limits_dir {
 public:
  explicit limits_dir(const std::string& yaml = limits_yaml)
      : dir_(test::make_temp_dir("sluice-rls-unit")) {
    std::ofstream(dir_ + "/limits.yaml") << yaml;
  }
  ~limits_dir() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  const std::string& path() const { return dir_; }
  std::string file() const { return dir_ + "/limits.yaml"; }

 private:
  std::string dir_;
};

std::string with_section(const std::string& section) {
  return "policies: {api: {capacity: 5, refill_per_second: 1}}\nenvoy_rls:\n" + section;
}

std::string error_of(const std::string& yaml, const std::string& source = "test.yaml") {
  try {
    parse_config(yaml, source);
  } catch (const config_error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(DaemonEnvoyRlsTest, SectionDefaultsAndEveryKey) {
  limits_dir dir;
  auto c = parse_config(with_section("  config: " + dir.file() + "\n"), "test.yaml");
  ASSERT_TRUE(c.envoy_rls.enabled());
  EXPECT_EQ(c.envoy_rls.listen(), "127.0.0.1:8081");
  EXPECT_EQ(c.envoy_rls.on_backend_failure, rls_failure_mode::unavailable);
  EXPECT_FALSE(c.envoy_rls.merge_domains);
  EXPECT_NE(c.envoy_rls.limits->find("edge"), nullptr);
  EXPECT_EQ(c.envoy_rls.max_descriptors, 256u);
  EXPECT_EQ(c.envoy_rls.max_descriptor_entries, 64u);
  auto capped = parse_config(with_section("  config: " + dir.file() +
                                          "\n  max_descriptors: 3\n  max_descriptor_entries: 2\n"),
                             "test.yaml");
  EXPECT_EQ(capped.envoy_rls.max_descriptors, 3u);
  EXPECT_EQ(capped.envoy_rls.max_descriptor_entries, 2u);

  auto all = parse_config(with_section("  listen: \"[::1]:9001\"\n  config: [" + dir.path() +
                                       "]\n  on_backend_failure: local\n  merge_domains: true\n"),
                          "test.yaml");
  EXPECT_EQ(all.envoy_rls.listen(), "[::1]:9001");
  EXPECT_EQ(all.envoy_rls.on_backend_failure, rls_failure_mode::local);
  EXPECT_TRUE(all.envoy_rls.merge_domains);
  EXPECT_EQ(all.envoy_rls.config, std::vector<std::string>{dir.path()});

  for (auto m : {"open", "closed"}) {
    auto cm = parse_config(
        with_section("  config: " + dir.file() + "\n  on_backend_failure: " + m + "\n"), "t.yaml");
    EXPECT_EQ(to_string(cm.envoy_rls.on_backend_failure), m);
  }
  EXPECT_FALSE(parse_config("policies: {api: {capacity: 5, refill_per_second: 1}}\n", "t.yaml")
                   .envoy_rls.enabled());
}

TEST(DaemonEnvoyRlsTest, SectionErrorsNameFileLineAndField) {
  limits_dir dir;
  const auto cfg = "  config: " + dir.file() + "\n";
  EXPECT_EQ(error_of(with_section(cfg + "  bogus: 1\n")),
            "test.yaml:4: envoy_rls.bogus: unknown key");
  EXPECT_EQ(error_of(with_section("  listen: 127.0.0.1\n" + cfg)),
            "test.yaml:3: envoy_rls.listen: must be HOST:PORT, e.g. 127.0.0.1:8080 or [::1]:8080");
  EXPECT_EQ(error_of(with_section(cfg + "  on_backend_failure: deny\n")),
            "test.yaml:4: envoy_rls.on_backend_failure: must be unavailable, open, closed or "
            "local, got \"deny\"");
  EXPECT_NE(error_of(with_section("  listen: 127.0.0.1:1\n"))
                .find("test.yaml:3: envoy_rls.config: is required"),
            std::string::npos);
  EXPECT_EQ(error_of(with_section("  config: []\n")),
            "test.yaml:3: envoy_rls.config: names no file or directory");
  EXPECT_EQ(error_of(with_section(cfg + "  max_descriptors: 0\n"))
                .rfind("test.yaml:4: envoy_rls.max_descriptors: ", 0),
            0u);
  EXPECT_EQ(error_of(with_section(cfg + "  max_descriptor_entries: many\n"))
                .rfind("test.yaml:4: envoy_rls.max_descriptor_entries: ", 0),
            0u);
  EXPECT_EQ(error_of("policies: {api: {capacity: 5, refill_per_second: 1}}\nenvoy_rls: 1\n"),
            "test.yaml:2: envoy_rls: must be a mapping");
  // An error in a limits file names that file and its line.
  limits_dir bad(
      "domain: edge\ndescriptors:\n  - key: a\n    rate_limit: {unit: fortnight, "
      "requests_per_unit: 1}\n");
  const auto e = error_of(with_section("  config: " + bad.file() + "\n"));
  EXPECT_EQ(e.rfind(bad.file() + ":4: envoy_rls.config: ", 0), 0u) << e;
  // A path that does not exist is this file's error, at the line that names it.
  EXPECT_EQ(error_of(with_section("  config: /nonexistent/limits.yaml\n")),
            "test.yaml:3: envoy_rls.config: /nonexistent/limits.yaml: no such file or directory");
  limits_dir good;
  EXPECT_EQ(
      error_of(with_section("  config:\n    - " + good.file() + "\n    - /nonexistent/a.yaml\n")),
      "test.yaml:5: envoy_rls.config: /nonexistent/a.yaml: no such file or directory");
}

TEST(DaemonEnvoyRlsTest, RelativeLimitsPathsAreBesideTheConfigFile) {
  limits_dir dir;
  auto c = parse_config(with_section("  config: limits.yaml\n"), dir.path() + "/sluiced.yaml");
  EXPECT_NE(c.envoy_rls.limits->find("edge"), nullptr);
}

// The names and numbers of the public API (issue 19): an unmodified Envoy must read what
// sluiced writes and the reverse.
TEST(DaemonEnvoyRlsTest, ProtoNamesAndFieldNumbersAreThePublicApis) {
  auto number = [](const google::protobuf::Descriptor* d, const char* field) {
    const auto* f = d->FindFieldByName(field);
    return f ? f->number() : -1;
  };
  const auto* req = pb::RateLimitRequest::descriptor();
  EXPECT_EQ(req->full_name(), "envoy.service.ratelimit.v3.RateLimitRequest");
  EXPECT_EQ(number(req, "domain"), 1);
  EXPECT_EQ(number(req, "descriptors"), 2);
  EXPECT_EQ(number(req, "hits_addend"), 3);
  const auto* desc = common::RateLimitDescriptor::descriptor();
  EXPECT_EQ(desc->full_name(), "envoy.extensions.common.ratelimit.v3.RateLimitDescriptor");
  EXPECT_EQ(number(desc, "entries"), 1);
  EXPECT_EQ(number(desc, "limit"), 2);
  EXPECT_EQ(number(desc, "hits_addend"), 3);
  EXPECT_EQ(desc->FindFieldByName("hits_addend")->message_type()->full_name(),
            "google.protobuf.UInt64Value");
  EXPECT_EQ(number(common::RateLimitDescriptor::Entry::descriptor(), "key"), 1);
  EXPECT_EQ(number(common::RateLimitDescriptor::Entry::descriptor(), "value"), 2);
  const auto* over = common::RateLimitDescriptor::RateLimitOverride::descriptor();
  EXPECT_EQ(number(over, "requests_per_unit"), 1);
  EXPECT_EQ(number(over, "unit"), 2);
  EXPECT_EQ(over->FindFieldByName("unit")->enum_type()->full_name(), "envoy.type.v3.RateLimitUnit");
  const auto* res = pb::RateLimitResponse::descriptor();
  EXPECT_EQ(number(res, "overall_code"), 1);
  EXPECT_EQ(number(res, "statuses"), 2);
  EXPECT_EQ(number(res, "response_headers_to_add"), 3);
  EXPECT_EQ(number(res, "request_headers_to_add"), 4);
  EXPECT_EQ(number(res, "raw_body"), 5);
  EXPECT_EQ(number(res, "dynamic_metadata"), 6);
  EXPECT_EQ(res->FindFieldByName("response_headers_to_add")->message_type()->full_name(),
            "envoy.config.core.v3.HeaderValue");
  const auto* st = pb::RateLimitResponse::DescriptorStatus::descriptor();
  EXPECT_EQ(number(st, "code"), 1);
  EXPECT_EQ(number(st, "current_limit"), 2);
  EXPECT_EQ(number(st, "limit_remaining"), 3);
  EXPECT_EQ(number(st, "duration_until_reset"), 4);
  const auto* rl = pb::RateLimitResponse::RateLimit::descriptor();
  EXPECT_EQ(number(rl, "name"), 3);
  EXPECT_EQ(number(rl, "requests_per_unit"), 1);
  EXPECT_EQ(number(rl, "unit"), 2);
  EXPECT_EQ(pb::RateLimitResponse::OVER_LIMIT, 2);
  EXPECT_EQ(pb::RateLimitResponse::RateLimit::WEEK, 7);
  EXPECT_EQ(std::string(pb::RateLimitService::service_full_name()),
            "envoy.service.ratelimit.v3.RateLimitService");
}

http_response post_json(service& svc, boost::asio::io_context& ioc, const std::string& body) {
  return test::call_service(svc, ioc, "POST", "/json", "10.0.0.1",
                            {{"Content-Type", "application/json"}}, body);
}

std::string entry(const std::string& key, const std::string& value) {
  return R"({"entries":[{"key":")" + key + R"(","value":")" + value + R"("}]})";
}

TEST(DaemonEnvoyRlsTest, JsonDecidesAllOrNothingPeeksAndCounts) {
  limits_dir dir;
  service svc(parse_config(with_section("  config: " + dir.file() + "\n"), "t.yaml"), {},
              test::unit_clock());
  boost::asio::io_context ioc;
  const auto both = R"({"domain":"edge","descriptors":[)" + entry("tenant", "t") + "," +
                    entry("plan", "free") + "]}";
  EXPECT_EQ(post_json(svc, ioc, both).result_int(), 200);
  EXPECT_EQ(post_json(svc, ioc, both).result_int(), 200);
  auto denied = post_json(svc, ioc, both);
  ASSERT_EQ(denied.result_int(), 429);
  auto j = json::parse(denied.body());
  EXPECT_EQ(j.at("overallCode"), "OVER_LIMIT");
  EXPECT_EQ(j.at("statuses").at(0).at("code"), "OK");
  EXPECT_EQ(j.at("statuses").at(0).at("limitRemaining"), 3);  // nothing spent
  EXPECT_EQ(j.at("statuses").at(1).at("code"), "OVER_LIMIT");
  EXPECT_EQ(j.at("statuses").at(1).at("currentLimit").at("unit"), "HOUR");
  // hits_addend 0 looks: 3 left before and after.
  const auto peek =
      R"({"domain":"edge","descriptors":[{"entries":[{"key":"tenant","value":"t"}],"hitsAddend":0}]})";
  for (int i = 0; i < 2; ++i) {
    auto r = json::parse(post_json(svc, ioc, peek).body());
    EXPECT_EQ(r.at("statuses").at(0).at("limitRemaining"), 3);
  }
  // Shadow mode: OK whatever it decides.
  const auto watch = R"({"domain":"edge","descriptors":[)" + entry("watch", "w") + "]}";
  EXPECT_EQ(post_json(svc, ioc, watch).result_int(), 200);
  EXPECT_EQ(post_json(svc, ioc, watch).result_int(), 200);

  const auto text = test::call_service(svc, ioc, "GET", "/metrics", "10.0.0.1", {}, "").body();
  for (const char* line :
       {R"(ratelimit_service_rate_limit_total_hits_total{descriptor="edge.tenant",domain="edge"} 3)",
        R"(ratelimit_service_rate_limit_within_limit_total{descriptor="edge.tenant",domain="edge"} 3)",
        R"(ratelimit_service_rate_limit_over_limit_total{descriptor="edge.plan_free",domain="edge"} 1)",
        R"(ratelimit_service_rate_limit_shadow_mode_total{descriptor="edge.watch",domain="edge"} 1)",
        R"(sluice_rls_calls_total{code="over_limit",transport="json"} 1)",
        R"(sluice_http_requests_total{code="429",endpoint="json"} 1)"}) {
    EXPECT_NE(text.find(std::string(line) + "\n"), std::string::npos) << line << "\n" << text;
  }
}

// What the config or the match validated once is not validated per call: only the bucket
// key, made of the request's entries, can be out of bounds, and it is refused as such.
TEST(DaemonEnvoyRlsTest, OnlyTheBucketKeyIsCheckedPerCall) {
  limits_dir dir;
  service svc(parse_config(with_section("  config: " + dir.file() + "\n"), "t.yaml"), {},
              test::unit_clock());
  boost::asio::io_context ioc;
  const auto long_key =
      R"({"domain":"edge","descriptors":[)" + entry("tenant", std::string(2000, 'x')) + "]}";
  auto r = post_json(svc, ioc, long_key);
  EXPECT_EQ(r.result_int(), 400);
  EXPECT_EQ(json::parse(r.body()).at("detail"),
            "descriptor 0: " + make_error_code(errc::key_too_long).message())
      << r.body();
  // An override's policy (a fixed window of requests_per_unit, at most max_capacity) is
  // decided as built.
  const auto huge = R"({"domain":"edge","descriptors":[{"entries":[{"key":"tenant","value":"o"}],)"
                    R"("limit":{"requestsPerUnit":4294967295,"unit":"SECOND"}}]})";
  auto o = post_json(svc, ioc, huge);
  EXPECT_EQ(o.result_int(), 200) << o.body();
  EXPECT_EQ(json::parse(o.body()).at("overallCode"), "OK") << o.body();
}

TEST(DaemonEnvoyRlsTest, JsonRefusesWhatTheReferenceRefuses) {
  limits_dir dir;
  service svc(parse_config(with_section("  config: " + dir.file() + "\n"), "t.yaml"), {},
              test::unit_clock());
  boost::asio::io_context ioc;
  for (const std::string& bad : {std::string("{"), std::string(R"({"domain":"edge","x":1})"),
                                 std::string(R"({"domain":"","descriptors":[{}]})"),
                                 std::string(R"({"domain":"edge"})"), std::string("\xff")}) {
    auto r = post_json(svc, ioc, bad);
    EXPECT_EQ(r.result_int(), 400) << bad;
    EXPECT_EQ(json::parse(r.body()).at("error"), "invalid_request") << r.body();
  }
  EXPECT_EQ(
      json::parse(post_json(svc, ioc, R"({"domain":"","descriptors":[{}]})").body()).at("detail"),
      "rate limit domain must not be empty");
  // Over the caps: refused before any matching, and nothing is spent.
  service capped(parse_config(with_section("  config: " + dir.file() +
                                           "\n  max_descriptors: 2\n  max_descriptor_entries: 2\n"),
                              "t.yaml"),
                 {}, test::unit_clock());
  const auto three = R"({"domain":"edge","descriptors":[)" + entry("tenant", "c") + "," +
                     entry("tenant", "c") + "," + entry("tenant", "c") + "]}";
  auto over = post_json(capped, ioc, three);
  EXPECT_EQ(over.result_int(), 400);
  EXPECT_NE(json::parse(over.body())
                .at("detail")
                .get<std::string>()
                .find("3 descriptors; envoy_rls.max_descriptors is 2"),
            std::string::npos)
      << over.body();
  const auto wide =
      R"({"domain":"edge","descriptors":[{"entries":[{"key":"tenant","value":"c"},{"key":"a","value":"1"},{"key":"b","value":"2"}]}]})";
  auto too_wide = post_json(capped, ioc, wide);
  EXPECT_EQ(too_wide.result_int(), 400);
  EXPECT_NE(json::parse(too_wide.body())
                .at("detail")
                .get<std::string>()
                .find("descriptor 0 has 3 entries; envoy_rls.max_descriptor_entries is 2"),
            std::string::npos)
      << too_wide.body();
  // At the caps: decided, and the refused calls spent nothing (5 an hour: 3 left after 2).
  const auto two = R"({"domain":"edge","descriptors":[)" + entry("tenant", "c") + "," +
                   entry("tenant", "c") + "]}";
  auto at_cap = json::parse(post_json(capped, ioc, two).body());
  EXPECT_EQ(at_cap.at("overallCode"), "OK");
  EXPECT_EQ(at_cap.at("statuses").at(1).at("limitRemaining"), 3);
  // Without the section, /json does not exist.
  service plain(parse_config("policies: {api: {capacity: 5, refill_per_second: 1}}\n", "t.yaml"),
                {}, test::unit_clock());
  EXPECT_EQ(post_json(plain, ioc, R"({"domain":"edge"})").result_int(), 404);
}

}  // namespace
}  // namespace sluice::daemon
