// The reference rate limit service's config (envoyproxy/ratelimit YAML): every key it
// accepts loads into the documented fields, and every file it refuses is refused here too,
// with the file, the line and the reason.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <variant>
#include <vector>

#include "envoy/rls_config.hpp"

namespace sluice::envoy {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::seconds;

rls_config load_ok(const std::vector<rls_source>& sources, const rls_load_options& options = {}) {
  auto result = parse_rls_config(sources, options);
  if (auto* error = std::get_if<rls_config_error>(&result)) {
    ADD_FAILURE() << "unexpected error: " << error->what();
    return {};
  }
  return std::get<rls_config>(std::move(result));
}

rls_config load_ok(const std::string& yaml) { return load_ok({{"a.yaml", yaml}}); }

rls_config_error load_error(const std::vector<rls_source>& sources,
                            const rls_load_options& options = {}) {
  auto result = parse_rls_config(sources, options);
  if (auto* error = std::get_if<rls_config_error>(&result)) return *error;
  ADD_FAILURE() << "loaded, expected an error";
  return {};
}

rls_config_error load_error(const std::string& yaml) { return load_error({{"a.yaml", yaml}}); }

// Every key the reference accepts, in one file.
constexpr const char* every_field = R"(domain: edge
descriptors:
  - key: remote_address
    rate_limit:
      unit: second
      requests_per_unit: 10
      name: per_ip
  - key: remote_address
    value: 50.0.0.5
    shadow_mode: true
    quota_mode: true
    detailed_metric: true
    value_to_metric: true
    rate_limit:
      unit: Minute
      requests_per_unit: 0
  - key: internal
    rate_limit:
      unlimited: true
  - key: tenant
    value: "t-*"
    share_threshold: true
    metadata:
      service: backend-a
      weight: 3
      ratio: 0.5
      on: true
      none: ~
      tags: [x, "7"]
      nested: {k: "v\"q"}
    descriptors:
      - key: path
        rate_limit:
          unit: hour
          requests_per_unit: 1000
          name: tenant_path
          replaces:
            - name: per_ip
            - name: other
)";

TEST(EnvoyConfigTest, EveryReferenceFieldLoads) {
  const rls_config c = load_ok(every_field);
  ASSERT_EQ(c.domains.size(), 1u);
  const rls_domain* d = c.find("edge");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(c.find("other"), nullptr);
  EXPECT_EQ(d->name, "edge");
  EXPECT_EQ(d->files, std::vector<std::string>{"a.yaml"});
  ASSERT_EQ(d->descriptors.size(), 4u);

  const auto& ip = d->descriptors[0];
  EXPECT_EQ(ip.key, "remote_address");
  EXPECT_EQ(ip.value, "");
  EXPECT_EQ(ip.composite, "remote_address");
  EXPECT_EQ(ip.full_key, "edge.remote_address");
  EXPECT_EQ(ip.file, "a.yaml");
  EXPECT_EQ(ip.line, 3);
  EXPECT_FALSE(ip.wildcard);
  ASSERT_TRUE(ip.rate_limit);
  EXPECT_EQ(ip.rate_limit->unit, rls_unit::second);
  EXPECT_EQ(ip.rate_limit->requests_per_unit, 10u);
  EXPECT_EQ(ip.rate_limit->name, "per_ip");
  EXPECT_FALSE(ip.rate_limit->unlimited);
  EXPECT_TRUE(ip.rate_limit->replaces.empty());
  EXPECT_FALSE(ip.shadow_mode);
  EXPECT_EQ(ip.metadata_json, "");

  const auto& blocked = d->descriptors[1];
  EXPECT_EQ(blocked.value, "50.0.0.5");
  EXPECT_EQ(blocked.composite, "remote_address_50.0.0.5");
  EXPECT_EQ(blocked.full_key, "edge.remote_address_50.0.0.5");
  EXPECT_TRUE(blocked.shadow_mode);
  EXPECT_TRUE(blocked.quota_mode);
  EXPECT_TRUE(blocked.detailed_metric);
  EXPECT_TRUE(blocked.value_to_metric);
  EXPECT_FALSE(blocked.share_threshold);
  ASSERT_TRUE(blocked.rate_limit);
  EXPECT_EQ(blocked.rate_limit->unit, rls_unit::minute);
  EXPECT_EQ(blocked.rate_limit->requests_per_unit, 0u);
  // Zero admits nothing: there is no policy to check.
  EXPECT_EQ(blocked.rate_limit->policy.limit, 0u);
  EXPECT_EQ(blocked.rate_limit->policy.capacity, 0u);

  const auto& internal = d->descriptors[2];
  ASSERT_TRUE(internal.rate_limit);
  EXPECT_TRUE(internal.rate_limit->unlimited);
  EXPECT_EQ(internal.rate_limit->unit, rls_unit::unknown);

  const auto& tenant = d->descriptors[3];
  EXPECT_TRUE(tenant.wildcard);
  EXPECT_TRUE(tenant.share_threshold);
  EXPECT_FALSE(tenant.rate_limit);
  EXPECT_EQ(tenant.metadata_json,
            R"({"service":"backend-a","weight":3,"ratio":0.5,"true":true,"none":null,)"
            R"("tags":["x","7"],"nested":{"k":"v\"q"}})");
  ASSERT_EQ(tenant.descriptors.size(), 1u);
  const auto& path = tenant.descriptors[0];
  EXPECT_EQ(path.full_key, "edge.tenant_t-*.path");
  EXPECT_EQ(path.line, 32);
  ASSERT_TRUE(path.rate_limit);
  EXPECT_EQ(path.rate_limit->unit, rls_unit::hour);
  EXPECT_EQ(path.rate_limit->requests_per_unit, 1000u);
  EXPECT_EQ(path.rate_limit->name, "tenant_path");
  EXPECT_EQ(path.rate_limit->replaces, (std::vector<std::string>{"per_ip", "other"}));

  // The lookup index of the top level.
  const auto& by_ip = d->index.keys.at("remote_address");
  EXPECT_EQ(by_ip.key_only, 0u);
  EXPECT_EQ(by_ip.values.at("50.0.0.5"), 1u);
  EXPECT_TRUE(by_ip.wildcards.empty());
  const auto& by_tenant = d->index.keys.at("tenant");
  EXPECT_EQ(by_tenant.wildcards, std::vector<std::size_t>{3});
  EXPECT_FALSE(by_tenant.key_only);
}

TEST(EnvoyConfigTest, DefaultPolicyIsTheReferencesFixedWindow) {
  const rls_config c = load_ok(R"(domain: d
descriptors:
  - {key: s, rate_limit: {unit: second, requests_per_unit: 5}}
  - {key: m, rate_limit: {unit: MINUTE, requests_per_unit: 6}}
  - {key: h, rate_limit: {unit: hour, requests_per_unit: 7}}
  - {key: d, rate_limit: {unit: day, requests_per_unit: 8}}
  - {key: w, rate_limit: {unit: week, requests_per_unit: 9}}
  - {key: mo, rate_limit: {unit: month, requests_per_unit: 10}}
  - {key: y, rate_limit: {unit: year, requests_per_unit: 11}}
)");
  const auto& ds = c.find("d")->descriptors;
  ASSERT_EQ(ds.size(), 7u);
  const std::vector<milliseconds> windows{seconds(1),    seconds(60),    hours(1),       hours(24),
                                          hours(24 * 7), hours(24 * 30), hours(24 * 365)};
  for (std::size_t i = 0; i < ds.size(); ++i) {
    const auto& p = ds[i].rate_limit->policy;
    EXPECT_EQ(p.algorithm, algorithm::fixed_window) << i;
    EXPECT_EQ(p.limit, 5u + i) << i;
    EXPECT_EQ(p.window, windows[i]) << i;
    EXPECT_EQ(p.capacity, 0u) << i;
    EXPECT_EQ(p.refill_per_second, 0.0) << i;
  }
  EXPECT_EQ(ds[6].rate_limit->unit, rls_unit::year);
}

TEST(EnvoyConfigTest, UnitsParseCaseInsensitivelyAndPrint) {
  EXPECT_EQ(parse_unit("second"), rls_unit::second);
  EXPECT_EQ(parse_unit("SeCoNd"), rls_unit::second);
  EXPECT_EQ(parse_unit("WEEK"), rls_unit::week);
  EXPECT_EQ(parse_unit("unknown"), std::nullopt);
  EXPECT_EQ(parse_unit(""), std::nullopt);
  EXPECT_EQ(parse_unit("seconds"), std::nullopt);
  EXPECT_EQ(to_string(rls_unit::month), "MONTH");
  EXPECT_EQ(to_string(rls_unit::unknown), "UNKNOWN");
  EXPECT_EQ(unit_window(rls_unit::month), hours(24 * 30));
  EXPECT_EQ(unit_window(rls_unit::unknown), milliseconds(0));
  EXPECT_EQ(static_cast<int>(rls_unit::week), 7);
}

TEST(EnvoyConfigTest, SluiceAlgorithmsAndBurst) {
  const rls_config c = load_ok(R"(domain: d
descriptors:
  - key: tb
    rate_limit: {unit: second, requests_per_unit: 10, algorithm: token_bucket, burst: 50}
  - key: gcra
    rate_limit: {unit: minute, requests_per_unit: 120, algorithm: gcra}
  - key: sw
    rate_limit: {unit: minute, requests_per_unit: 100, algorithm: sliding_window}
  - key: swc
    rate_limit: {unit: hour, requests_per_unit: 1000, algorithm: sliding_window_counter}
  - key: fw
    rate_limit: {unit: day, requests_per_unit: 3, algorithm: fixed_window}
)");
  const auto& ds = c.find("d")->descriptors;
  const auto& tb = ds[0].rate_limit->policy;
  EXPECT_EQ(tb.algorithm, algorithm::token_bucket);
  EXPECT_EQ(tb.capacity, 50u);
  EXPECT_DOUBLE_EQ(tb.refill_per_second, 10.0);
  EXPECT_EQ(tb.limit, 0u);
  EXPECT_EQ(ds[0].rate_limit->burst, 50u);
  const auto& gcra = ds[1].rate_limit->policy;
  EXPECT_EQ(gcra.algorithm, algorithm::gcra);
  EXPECT_EQ(gcra.capacity, 120u);  // burst defaults to requests_per_unit
  EXPECT_DOUBLE_EQ(gcra.refill_per_second, 2.0);
  EXPECT_FALSE(ds[1].rate_limit->burst);
  const auto& sw = ds[2].rate_limit->policy;
  EXPECT_EQ(sw.algorithm, algorithm::sliding_window);
  EXPECT_EQ(sw.limit, 100u);
  EXPECT_EQ(sw.window, seconds(60));
  EXPECT_EQ(ds[3].rate_limit->policy.algorithm, algorithm::sliding_window_counter);
  EXPECT_EQ(ds[3].rate_limit->policy.window, hours(1));
  EXPECT_EQ(ds[4].rate_limit->policy.algorithm, algorithm::fixed_window);
  EXPECT_EQ(ds[4].rate_limit->policy.limit, 3u);
  EXPECT_EQ(tb.lease_ttl, milliseconds(0));  // leases are opt-in
}

TEST(EnvoyConfigTest, LeaseTtlReachesThePolicy) {
  const rls_config c = load_ok(R"(domain: d
descriptors:
  - key: route
    rate_limit: {unit: second, requests_per_unit: 1000, algorithm: token_bucket, lease_ttl: 50ms}
)");
  const auto& rl = *c.find("d")->descriptors[0].rate_limit;
  EXPECT_EQ(rl.lease_ttl, milliseconds(50));
  EXPECT_EQ(rl.policy.lease_ttl, milliseconds(50));
}

TEST(EnvoyConfigTest, LoadsWhatTheReferenceLoadsTheWayYamlV2ReadsIt) {
  const rls_config c = load_ok(R"(domain: 42
descriptors:
  - key: a
    value: 123
    rate_limit:
  - key: b
    value: ~
    descriptors:
  - key: c
    value: true
    domain: ignored            # a known key in the wrong place: the reference ignores it
    rate_limit:
      requests_per_unit: 5
      requests_per_unit: 0x10  # repeated: yaml.v2 keeps the last
      unit: second
      shadow_mode: true        # likewise ignored inside rate_limit
    shadow_mode: yes
  - key: huge
    rate_limit: {unit: second, requests_per_unit: 4294967295}
  - key: dated
    value: 2024-01-01
)");
  const rls_domain* d = c.find("42");
  ASSERT_NE(d, nullptr);
  const auto& ds = d->descriptors;
  ASSERT_EQ(ds.size(), 5u);
  EXPECT_EQ(ds[0].value, "123");
  EXPECT_FALSE(ds[0].rate_limit);  // `rate_limit:` with nothing is no limit
  EXPECT_EQ(ds[1].value, "");      // null is an empty value: key-only
  EXPECT_EQ(d->index.keys.at("b").key_only, 1u);
  EXPECT_EQ(ds[2].value, "true");
  EXPECT_EQ(ds[2].rate_limit->requests_per_unit, 16u);
  EXPECT_TRUE(ds[2].shadow_mode);
  EXPECT_EQ(ds[3].rate_limit->requests_per_unit, 4294967295u);
  // Above Sluice's largest limit, the default fixed window counts 10^9 per unit.
  EXPECT_EQ(ds[3].rate_limit->policy.limit, max_capacity);
  EXPECT_EQ(ds[4].value, "2024-01-01");
}

TEST(EnvoyConfigTest, AnchorsAliasesAndMergeKeysWorkAsInYamlV2) {
  const rls_config c = load_ok(R"(domain: d
descriptors:
  - key: a
    rate_limit: &base {unit: second, requests_per_unit: 5, name: base}
  - key: b
    rate_limit:
      <<: *base
      requests_per_unit: 7
  - key: c
    <<: [{value: x}, {value: y, shadow_mode: true}]
    metadata: {<<: {k: 1, j: 2}, k: 3, z: 0, z: 9}
    rate_limit: *base
)");
  const auto& ds = c.find("d")->descriptors;
  ASSERT_EQ(ds.size(), 3u);
  EXPECT_EQ(ds[1].rate_limit->unit, rls_unit::second);
  EXPECT_EQ(ds[1].rate_limit->requests_per_unit, 7u);
  EXPECT_EQ(ds[1].rate_limit->name, "base");
  EXPECT_EQ(ds[2].value, "x");  // the first merged mapping that sets it
  EXPECT_TRUE(ds[2].shadow_mode);
  EXPECT_EQ(ds[2].rate_limit->requests_per_unit, 5u);
  EXPECT_EQ(ds[2].metadata_json, R"({"k":3,"z":9,"j":2})");
}

TEST(EnvoyConfigTest, EmptyDescriptorListsAndNoDescriptorsLoad) {
  const rls_config c =
      load_ok({{"a.yaml", "domain: a\n"}, {"b.yaml", "domain: b\ndescriptors: []\n"}});
  EXPECT_EQ(c.domains.size(), 2u);
  EXPECT_TRUE(c.find("a")->descriptors.empty());
  EXPECT_TRUE(c.find("b")->descriptors.empty());
  EXPECT_TRUE(std::holds_alternative<rls_config>(parse_rls_config({})));
}

TEST(EnvoyConfigTest, DuplicateDomainIsRefusedUnlessMerging) {
  const std::vector<rls_source> files{
      {"one.yaml",
       "domain: d\ndescriptors:\n  - {key: a, rate_limit: {unit: second, "
       "requests_per_unit: 1}}\n"},
      {"two.yaml",
       "# more\ndomain: d\ndescriptors:\n  - {key: b, rate_limit: {unit: second, "
       "requests_per_unit: 2}}\n"}};
  const auto e = load_error(files);
  EXPECT_EQ(e.file, "two.yaml");
  EXPECT_EQ(e.line, 2);
  EXPECT_EQ(e.what(),
            "two.yaml:2: duplicate domain 'd' in config file (already loaded from "
            "one.yaml)");

  const rls_config merged = load_ok(files, {.merge_domains = true});
  const rls_domain* d = merged.find("d");
  ASSERT_NE(d, nullptr);
  ASSERT_EQ(d->descriptors.size(), 2u);
  EXPECT_EQ(d->descriptors[0].key, "a");
  EXPECT_EQ(d->descriptors[1].key, "b");
  EXPECT_EQ(d->descriptors[1].file, "two.yaml");
  EXPECT_EQ(d->index.keys.at("b").key_only, 1u);
  EXPECT_EQ(d->files, (std::vector<std::string>{"one.yaml", "two.yaml"}));

  // Merged, the same descriptor in two files is still a duplicate.
  const auto dup = load_error({files[0], {"three.yaml", "domain: d\ndescriptors:\n  - key: a\n"}},
                              {.merge_domains = true});
  EXPECT_EQ(dup.what(), "three.yaml:3: duplicate descriptor composite key 'd.a'");
}

struct refusal {
  const char* name;
  const char* yaml;
  int line;
  const char* message;  // the whole message after "a.yaml:LINE: "
};

// Every file the reference refuses, and Sluice's own refusals of its extensions.
const refusal refusals[] = {
    {"empty file", "", 1, "config file cannot have empty domain"},
    {"empty domain", "domain: \"\"\ndescriptors: []\n", 1, "config file cannot have empty domain"},
    {"no domain", "descriptors:\n  - key: a\n", 1, "config file cannot have empty domain"},
    {"empty key", "domain: d\ndescriptors:\n  - key: a\n  - value: b\n", 4,
     "descriptor has empty key"},
    {"null key", "domain: d\ndescriptors:\n  - key: ~\n", 3, "descriptor has empty key"},
    {"duplicate key/value",
     "domain: d\ndescriptors:\n  - {key: a, value: b}\n  - {key: a, value: b}\n", 4,
     "duplicate descriptor composite key 'd.a_b'"},
    {"duplicate key only", "domain: d\ndescriptors:\n  - key: a\n  - key: a\n", 4,
     "duplicate descriptor composite key 'd.a'"},
    {"duplicate composite",
     "domain: d\ndescriptors:\n  - {key: a, value: b_c}\n  - {key: a_b, value: c}\n", 4,
     "duplicate descriptor composite key 'd.a_b_c'"},
    {"duplicate nested",
     "domain: d\ndescriptors:\n  - key: a\n    descriptors:\n      - key: b\n      - key: b\n", 6,
     "duplicate descriptor composite key 'd.a.b'"},
    {"unknown unit",
     "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: fortnight\n      "
     "requests_per_unit: 1\n",
     5, "invalid rate limit unit 'fortnight'"},
    {"unit UNKNOWN", "domain: d\ndescriptors:\n  - {key: a, rate_limit: {unit: unknown}}\n", 3,
     "invalid rate limit unit 'unknown'"},
    {"no unit", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {requests_per_unit: 1}\n", 4,
     "invalid rate limit unit ''"},
    {"unknown field in a descriptor", "domain: d\ndescriptors:\n  - key: a\n    limit: 5\n", 4,
     "config error, unknown key 'limit'"},
    {"unknown field at the top", "domain: d\nversion: 2\n", 2,
     "config error, unknown key 'version'"},
    {"unknown field in rate_limit",
     "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n      rpu: 3\n", 6,
     "config error, unknown key 'rpu'"},
    {"unlimited with a unit",
     "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unlimited: true\n      unit: "
     "second\n",
     6, "should not specify rate limit unit when unlimited"},
    {"replaces with an empty name",
     "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n      replaces:\n  "
     "      - name: \"\"\n",
     7, "should not have an empty replaces entry"},
    {"replaces without a name",
     "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n      replaces:\n  "
     "      - {}\n",
     7, "should not have an empty replaces entry"},
    {"replaces naming itself",
     "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n      name: x\n  "
     "    replaces: [{name: y}, {name: x}]\n",
     7, "replaces should not contain name of same descriptor"},
    {"integer key", "domain: d\n123: x\n", 2, "config error, key is not of type string: 123"},
    {"boolean key", "domain: d\ndescriptors:\n  - key: a\n    true: 1\n", 4,
     "config error, key is not of type string: true"},
    {"list key", "domain: d\n[a, b]: x\n", 2, "config error, key is not of type string: a list"},
    {"list of strings", "domain: d\ndescriptors:\n  - a\n  - b\n", 3,
     "config error, yaml file contains list of type other than map: a"},
    {"replaces as strings",
     "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n      replaces: "
     "[x]\n",
     6, "config error, yaml file contains list of type other than map: x"},
    {"bad yaml", "domain: d\ndescriptors:\n  - key: [unclosed\n", 4,
     "error loading config file: end of sequence flow not found"},
    {"bad indentation", "domain: d\n descriptors: x\n", 2,
     "error loading config file: illegal map value"},
    {"a list document", "- domain: d\n", 1,
     "error loading config file: the document must be a mapping (domain, descriptors), not a list"},
    {"a float value", "domain: d\ndescriptors:\n  - key: a\n    value: 1.5\n", 4,
     "error checking config: 1.5 is a number with a fraction or exponent; quote it if it is a "
     "value"},
    {"negative requests",
     "domain: d\ndescriptors:\n  - {key: a, rate_limit: {unit: second, requests_per_unit: -1}}\n",
     3, "requests_per_unit: must be a whole number from 0 to 4294967295, not -1"},
    {"too many requests",
     "domain: d\ndescriptors:\n  - {key: a, rate_limit: {unit: second, requests_per_unit: "
     "4294967296}}\n",
     3, "requests_per_unit: must be a whole number from 0 to 4294967295, not 4294967296"},
    {"quoted requests",
     "domain: d\ndescriptors:\n  - {key: a, rate_limit: {unit: second, requests_per_unit: "
     "\"10\"}}\n",
     3, "requests_per_unit: must be a whole number from 0 to 4294967295, not 10"},
    {"descriptors as a mapping", "domain: d\ndescriptors:\n  key: a\n", 3,
     "descriptors: must be a list of descriptors, not a mapping"},
    {"rate_limit as a string", "domain: d\ndescriptors:\n  - {key: a, rate_limit: fast}\n", 3,
     "rate_limit: must be a mapping, not fast"},
    {"shadow_mode as a number", "domain: d\ndescriptors:\n  - {key: a, shadow_mode: 3}\n", 3,
     "shadow_mode: must be true or false, not 3"},
    {"metadata as a list", "domain: d\ndescriptors:\n  - {key: a, metadata: [{a: 1}]}\n", 3,
     "metadata: must be a mapping, not a list"},
    {"share_threshold without a wildcard",
     "domain: d\ndescriptors:\n  - key: a\n    value: b\n    share_threshold: true\n", 3,
     "share_threshold can only be used with wildcard values (containing '*'), but found key "
     "'a_b'"},
    {"merging a scalar", "domain: d\ndescriptors:\n  - key: a\n    <<: 5\n", 4,
     "error loading config file: map merge requires map or sequence of maps as the value"},
    {"merging an unknown key", "domain: d\ndescriptors:\n  - key: a\n    <<: {valeu: 5}\n", 4,
     "config error, unknown key 'valeu'"},
    {"an alias inside its own anchor",
     "domain: d\ndescriptors: &x\n  - key: a\n    descriptors: *x\n", 3,
     "error loading config file: nested too deeply"},
    // Sluice's extensions.
    {"unknown algorithm",
     "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1, "
     "algorithm: leaky}\n",
     4,
     "algorithm: unknown 'leaky' (token_bucket, gcra, sliding_window, sliding_window_counter, "
     "fixed_window)"},
    {"burst on a window",
     "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1, "
     "burst: 5}\n",
     4,
     "burst: only for token_bucket and gcra (algorithm fixed_window counts requests_per_unit "
     "per unit)"},
    {"zero burst",
     "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1, "
     "algorithm: gcra, burst: 0}\n",
     4, "burst: must be at least 1"},
    {"algorithm outside rate_limit", "domain: d\ndescriptors:\n  - key: a\n    algorithm: gcra\n",
     4, "algorithm: belongs inside rate_limit (a Sluice extension)"},
    {"burst at the top", "domain: d\nburst: 3\n", 2,
     "burst: belongs inside a descriptor's rate_limit"},
    {"algorithm on unlimited",
     "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unlimited: true, algorithm: gcra}\n", 4,
     "algorithm, burst and lease_ttl have no meaning on an unlimited rate_limit"},
    {"lease_ttl past an hour",
     "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1, "
     "lease_ttl: 2h}\n",
     4, "lease_ttl: at most 1h, not 2h"},
    {"lease_ttl not a duration",
     "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1, "
     "lease_ttl: 50}\n",
     4,
     "lease_ttl: \"50\" is not a duration: want a whole number and a unit ms, s, m, h or d (e.g. "
     "250ms, 1s, 1m, 1h, 1d), or 0 for no leases"},
    {"a bucket too slow for Sluice",
     "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: year, requests_per_unit: 1, "
     "algorithm: token_bucket}\n",
     4,
     "rate_limit: 1 per YEAR with token_bucket (burst 1, refill 3.17098e-08/s) is not a valid "
     "Sluice policy: "},
    {"an exact window too long for Sluice",
     "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: "
     "20000, algorithm: sliding_window}\n",
     4, "rate_limit: 20000 per SECOND with sliding_window is not a valid Sluice policy: "},
};

TEST(EnvoyConfigTest, RefusesWhatTheReferenceRefusesWithFileAndLine) {
  for (const auto& r : refusals) {
    SCOPED_TRACE(r.name);
    const auto e = load_error(r.yaml);
    EXPECT_EQ(e.file, "a.yaml");
    EXPECT_EQ(e.line, r.line);
    const std::string prefix = "a.yaml:" + std::to_string(r.line) + ": ";
    EXPECT_EQ(e.what().substr(0, prefix.size()), prefix);
    const std::string expected = r.message;
    if (expected.ends_with(": ")) {
      // Ends with the library's own wording of the policy error.
      EXPECT_EQ(e.message.substr(0, expected.size()), expected);
      EXPECT_GT(e.message.size(), expected.size());
    } else {
      EXPECT_EQ(e.message, expected);
    }
  }
}

TEST(EnvoyConfigTest, TheFirstBadFileStopsTheLoad) {
  const auto e = load_error(
      {{"good.yaml", "domain: a\n"}, {"bad.yaml", "domain: b\nfoo: 1\n"}, {"worse.yaml", ""}});
  EXPECT_EQ(e.what(), "bad.yaml:2: config error, unknown key 'foo'");
}

TEST(EnvoyConfigTest, AnErrorWithoutALineHasNoLineInWhat) {
  const rls_config_error e{"missing.yaml", 0, "no such file or directory"};
  EXPECT_EQ(e.what(), "missing.yaml: no such file or directory");
}

// Files on disk: a directory contributes its *.yaml / *.yml files in name order.
class EnvoyConfigFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("sluice-envoy-config-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& text) {
    const auto path = dir_ / name;
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << text;
    return path.string();
  }

  std::filesystem::path dir_;
};

TEST_F(EnvoyConfigFilesTest, ReadsADirectorysYamlFilesInNameOrder) {
  write("b.yaml", "domain: d\ndescriptors:\n  - key: from_b\n");
  write("a.yml", "domain: d\ndescriptors:\n  - key: from_a\n");
  write("c.txt", "not yaml at all: [");
  write(".hidden.yaml", "domain: hidden\n");
  write("sub/e.yaml", "domain: nested\n");  // not read: directories are not walked
  const std::string single = write("single/one.yaml", "domain: single\n");

  auto result = load_rls_config({dir_.string(), single}, {.merge_domains = true});
  ASSERT_TRUE(std::holds_alternative<rls_config>(result))
      << std::get<rls_config_error>(result).what();
  const auto& c = std::get<rls_config>(result);
  EXPECT_EQ(c.domains.size(), 2u);
  const rls_domain* d = c.find("d");
  ASSERT_NE(d, nullptr);
  ASSERT_EQ(d->descriptors.size(), 2u);
  EXPECT_EQ(d->descriptors[0].key, "from_a");
  EXPECT_EQ(d->descriptors[1].key, "from_b");
  EXPECT_EQ(d->files,
            (std::vector<std::string>{(dir_ / "a.yml").string(), (dir_ / "b.yaml").string()}));
  EXPECT_NE(c.find("single"), nullptr);
  EXPECT_EQ(c.find("hidden"), nullptr);
  EXPECT_EQ(c.find("nested"), nullptr);
}

TEST_F(EnvoyConfigFilesTest, ErrorsNameTheFileOnDisk) {
  const std::string bad =
      write("conf/x.yaml", "domain: d\ndescriptors:\n  - key: a\n    valu: b\n");
  auto result = load_rls_config({(dir_ / "conf").string()});
  ASSERT_TRUE(std::holds_alternative<rls_config_error>(result));
  EXPECT_EQ(std::get<rls_config_error>(result).what(),
            bad + ":4: config error, unknown key 'valu'");

  const std::string missing = (dir_ / "nope.yaml").string();
  result = load_rls_config({missing});
  ASSERT_TRUE(std::holds_alternative<rls_config_error>(result));
  EXPECT_EQ(std::get<rls_config_error>(result).what(), missing + ": no such file or directory");
}

}  // namespace
}  // namespace sluice::envoy
