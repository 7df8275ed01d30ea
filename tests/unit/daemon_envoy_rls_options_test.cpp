// The options of sluiced's Envoy RLS beyond the limits: `shadow_mode` (the reference's
// SHADOW_MODE), its errors with file, line and field, and the answers through POST /json on
// the memory backend.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <boost/asio/io_context.hpp>
#include <nlohmann/json.hpp>

#include "config.hpp"
#include "service.hpp"
#include "support/process_child.hpp"
#include "support/service_call.hpp"

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

TEST(DaemonEnvoyRlsOptionsTest, ShadowModeIsOffByDefaultAndMustBeABoolean) {
  scratch_dir dir;
  EXPECT_FALSE(parse_config(with_keys(""), dir.source()).envoy_rls.shadow_mode);
  EXPECT_TRUE(parse_config(with_keys("  shadow_mode: true\n"), dir.source()).envoy_rls.shadow_mode);
  EXPECT_EQ(error_of(dir, "  shadow_mode: yes\n"),
            dir.source() + ":4: envoy_rls.shadow_mode: must be true or false, got \"yes\"");
}

TEST(DaemonEnvoyRlsOptionsTest, ShadowModeAnswersOkWhereOverAndCountsAsEver) {
  scratch_dir dir;
  service svc(parse_config(with_keys("  shadow_mode: true\n"), dir.source()));
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
       {"ratelimit_service_global_shadow_mode 1",
        R"(ratelimit_service_rate_limit_over_limit{descriptor="edge.plan_free",domain="edge"} 1)",
        R"(ratelimit_service_rate_limit_shadow_mode{descriptor="edge.plan_free",domain="edge"} 1)",
        R"(sluice_rls_calls_total{code="ok",transport="json"} 3)"}) {
    EXPECT_NE(text.find(std::string(line) + "\n"), std::string::npos) << line << "\n" << text;
  }
}

}  // namespace
}  // namespace sluice::daemon
