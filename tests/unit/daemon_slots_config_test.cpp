// sluiced's concurrency policies in YAML (`algorithm: concurrency`): read into
// config::concurrency_policies, apart from the rate policies; every mistake names its
// file, line and field.
#include <gtest/gtest.h>

#include "config.hpp"

namespace sluice::daemon {
namespace {

using std::chrono::milliseconds;

config_error error_of(const std::string& yaml) {
  try {
    parse_config(yaml, "slots.yaml");
  } catch (const config_error& e) {
    return e;
  }
  ADD_FAILURE() << "no config_error for:\n" << yaml;
  return config_error("", 0, "", "");
}

TEST(DaemonSlotsConfigTest, ConcurrencyPoliciesAreReadApartFromRatePolicies) {
  const auto c = parse_config(R"(
on_backend_failure: closed
policies:
  api: {capacity: 5, refill_per_second: 1}
  reports: {algorithm: concurrency, limit: 4, lease_ttl: 2m}
  uploads: {algorithm: concurrency, limit: 1, lease_ttl: 1500, on_backend_failure: local}
  jobs: {algorithm: concurrency, limit: 7}
)",
                              "slots.yaml");
  EXPECT_EQ(c.policies.size(), 1u);
  ASSERT_EQ(c.concurrency_policies.size(), 3u);
  const auto& r = c.concurrency_policies.at("reports");
  EXPECT_EQ(r.limit, 4u);
  EXPECT_EQ(r.lease_ttl, milliseconds{120'000});
  EXPECT_EQ(r.on_failure, failure_mode::closed) << "the top-level failure mode";
  const auto& u = c.concurrency_policies.at("uploads");
  EXPECT_EQ(u.lease_ttl, milliseconds{1500}) << "a bare number is milliseconds";
  EXPECT_EQ(u.on_failure, failure_mode::local);
  EXPECT_EQ(c.concurrency_policies.at("jobs").lease_ttl, milliseconds{30'000}) << "the default";
}

TEST(DaemonSlotsConfigTest, MistakesNameTheFileLineAndField) {
  auto e = error_of("policies:\n  r:\n    algorithm: concurrency\n    limit: 0\n");
  EXPECT_EQ(e.file(), "slots.yaml");
  EXPECT_EQ(e.line(), 4);
  EXPECT_EQ(e.field(), "policies.r.limit");

  e = error_of("policies:\n  r:\n    algorithm: concurrency\n    lease_ttl: 30s\n");
  EXPECT_EQ(e.field(), "policies.r.limit");
  EXPECT_NE(e.message().find("required"), std::string::npos);

  e = error_of("policies:\n  r:\n    algorithm: concurrency\n    limit: 2\n    lease_ttl: 2h\n");
  EXPECT_EQ(e.line(), 5);
  EXPECT_EQ(e.field(), "policies.r.lease_ttl");

  e = error_of("policies:\n  r:\n    algorithm: concurrency\n    limit: 2\n    lease_ttl: 0s\n");
  EXPECT_EQ(e.field(), "policies.r.lease_ttl");

  e = error_of("policies:\n  r:\n    algorithm: concurrency\n    limit: 2\n    window: 1m\n");
  EXPECT_EQ(e.field(), "policies.r.window");
  EXPECT_EQ(e.message(), "unknown key");

  e = error_of(R"(policies:
  r: {algorithm: concurrency, limit: 2}
rules:
  - {name: site, match: {path_prefix: /}, key: ip, policy: r}
)");
  EXPECT_EQ(e.line(), 4);
  EXPECT_EQ(e.field(), "rules[0].policy");
  EXPECT_NE(e.message().find("concurrency policy"), std::string::npos);
}

}  // namespace
}  // namespace sluice::daemon
