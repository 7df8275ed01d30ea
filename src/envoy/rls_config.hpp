#pragma once
/// The reference rate limit service's config (envoyproxy/ratelimit): one `domain` per YAML
/// file, a tree of `descriptors`, loaded once, validated, then read-only. Matching a request
/// against it is rls_match.hpp.
///
/// Loading follows the reference (src/config/config_impl.go): the same keys are accepted and
/// the same files are refused, and every refusal names the file and the line. Sluice adds two
/// keys inside `rate_limit`: `algorithm` (default fixed_window, what the reference counts) and
/// `burst` (token_bucket / gcra only; the bucket's capacity, default requests_per_unit).
/// A bucket refills requests_per_unit per unit; a window counts requests_per_unit per unit.
///
/// As the reference: a key it knows is accepted at any level and ignored where it has no
/// meaning (it checks names, not places); a repeated key keeps the last value (yaml.v2); a
/// scalar is read as YAML 1.1 resolves it (`yes` is true, `1.5` is a float, which the
/// reference refuses as a leaf); one file per domain unless merge_domains (the reference's
/// MERGE_DOMAIN_CONFIG), and a duplicate key/value at one level is refused across merged
/// files too. Where Sluice differs, on purpose:
///  - every error has a line, and the first error in document order is reported (the
///    reference walks Go maps, in random order);
///  - keys are literal and `*` is a wildcard in values only (the reference globs over
///    "key_value", so its `a` + `*` also matches a request key `a_b`), and a level is looked
///    up by key and value apart (the reference's "key_value" lookup would let key `a_b`,
///    value `c` answer a request for key `a`, value `b_c`);
///  - requests_per_unit above sluice::max_capacity (10^9) counts 10^9 per unit with the
///    default fixed window (the reference's uint32 goes to 4.29 * 10^9); with an explicit
///    algorithm it is refused;
///  - a directory is read one level deep, skipping names that start with '.' (Kubernetes'
///    ConfigMap "..data" links).
///
/// Thread-safety: a loaded rls_config is immutable; share it (e.g. shared_ptr<const>) between
/// threads freely.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <sluice/policy.hpp>

namespace sluice::envoy {

/// envoy.service.ratelimit.v3.RateLimitResponse.RateLimit.Unit; the numbers are the wire's.
/// (envoy.type.v3.RateLimitUnit, used by a request's override, has the same numbers 0..6.)
enum class rls_unit : std::uint8_t {
  unknown = 0,
  second = 1,
  minute = 2,
  hour = 3,
  day = 4,
  month = 5,
  year = 6,
  week = 7,
};

/// "SECOND", "MINUTE", ... (the proto enum's names); "UNKNOWN" for anything else.
std::string_view to_string(rls_unit u) noexcept;
/// The config's spelling, case-insensitive as the reference (`second`, `Second`, `SECOND`);
/// nullopt for an unknown name and for "unknown" itself.
std::optional<rls_unit> parse_unit(std::string_view s) noexcept;
/// The unit as a window: second 1 s, minute 60 s, hour 3600 s, day 86400 s, week 7 days,
/// month 30 days, year 365 days (the reference's UnitToDivider); zero for unknown.
std::chrono::milliseconds unit_window(rls_unit u) noexcept;

/// A descriptor's `rate_limit:` block.
struct rls_rate_limit {
  std::uint32_t requests_per_unit = 0;  ///< 0 is accepted (as by the reference): always over
  rls_unit unit = rls_unit::unknown;    ///< unknown only when `unlimited`
  bool unlimited = false;
  std::string name;                   ///< optional; what other limits' `replaces` name
  std::vector<std::string> replaces;  ///< names of limits this one drops when both match
  /// Sluice's extensions. `policy` is derived from the fields above at load time and
  /// validated (sluice::validate), so a match hands it to the limiter as is.
  sluice::algorithm algorithm = sluice::algorithm::fixed_window;
  std::optional<std::uint64_t> burst;  ///< token_bucket / gcra: capacity (default rpu)
  /// Quota leases (sluice::policy::lease_ttl): 0, the default, decides every call on the
  /// backend.
  std::chrono::milliseconds lease_ttl{0};
  sluice::policy policy;  ///< unset (all zero) when unlimited or rpu == 0
};

struct rls_descriptor_config;

/// How one level of the tree is searched, built at load time: per key, the exact values,
/// the wildcards in config order, and the key-only descriptor. Indexes into the level's
/// `descriptors`.
struct rls_level_index {
  struct by_key {
    std::map<std::string, std::size_t, std::less<>> values;  ///< exact values (and `a*` as text)
    std::vector<std::size_t> wildcards;                      ///< values with a `*`, config order
    std::optional<std::size_t> key_only;                     ///< no `value:`
  };
  std::map<std::string, by_key, std::less<>> keys;
};

/// One node of the tree: `key`, optional `value`, its limit and its children.
struct rls_descriptor_config {
  std::string key;
  std::string value;  ///< empty: matches any value of `key` (after exact and wildcard)
  /// A value containing `*` is a pattern: each `*` matches any run of characters (none
  /// included), anywhere in the value, as the reference's wildcards ("us-*", "*-prod",
  /// "a*b*c", "*"). Keys are always literal.
  bool wildcard = false;
  /// The composite the reference keys a level by: "key" or "key_value"; unique per level.
  std::string composite;
  std::optional<rls_rate_limit> rate_limit;
  bool shadow_mode = false;  ///< decided and counted, but never answers OVER_LIMIT
  /// A soft limit (the reference's quota mode): over it the answer stays OK and the
  /// response's metadata says which descriptors exceeded; the service decides that.
  bool quota_mode = false;
  bool detailed_metric = false;  ///< metric key uses the request's values, not the config's
  bool value_to_metric = false;  ///< metric key includes the request's value at this level
  bool share_threshold = false;  ///< wildcard: every matching value shares one bucket
  /// `metadata:` as a JSON object ("" when absent): YAML maps become objects, lists arrays,
  /// plain scalars numbers / booleans / null where YAML 1.1 resolves them so, anything else a
  /// string. The reference sends it to the client (dynamic metadata) when the descriptor is
  /// within its limit; google::protobuf::util::JsonStringToMessage turns it into a Struct.
  std::string metadata_json;
  std::vector<rls_descriptor_config> descriptors;
  rls_level_index index;  ///< over `descriptors`
  std::string file;       ///< where it was written, for messages
  int line = 0;
  /// The reference's stat key for this node: "domain.key_value.key2" (value omitted when
  /// empty), the name its metrics carry.
  std::string full_key;
};

/// One domain: the descriptors of every file that declared it, in load order.
struct rls_domain {
  std::string name;
  std::vector<rls_descriptor_config> descriptors;
  rls_level_index index;  ///< over `descriptors`
  std::vector<std::string> files;
};

/// Every domain, by name. Immutable once loaded.
struct rls_config {
  std::map<std::string, rls_domain, std::less<>> domains;
  /// The domain named `name`, or nullptr.
  const rls_domain* find(std::string_view name) const;
};

/// Why a set of files cannot be used. `line` is 1-based, 0 when not known (e.g. a file that
/// cannot be read).
struct rls_config_error {
  std::string file;
  int line = 0;
  std::string message;
  /// "FILE:LINE: message" ("FILE: message" when the line is not known).
  std::string what() const;
};

/// Either the config or the first error found.
using rls_load_result = std::variant<rls_config, rls_config_error>;

struct rls_load_options {
  /// Several files naming the same domain: false refuses the second ("duplicate domain", the
  /// reference's default); true adds its descriptors to the domain (the reference's
  /// MERGE_DOMAIN_CONFIG=true). A duplicate key/value at a domain's top level is refused
  /// either way, across files too.
  bool merge_domains = false;
};

/// One YAML text and the name used for it in errors (normally its path).
struct rls_source {
  std::string name;
  std::string text;
};

/// Loads every path: a file, or a directory whose `*.yaml` / `*.yml` files are read in name
/// order (not recursively; other files are skipped). Paths are taken in the order given.
/// Never throws for a bad config (only std::bad_alloc).
rls_load_result load_rls_config(const std::vector<std::string>& paths,
                                const rls_load_options& options = {});

/// The same from texts already in memory (tests, --check-config of a string).
rls_load_result parse_rls_config(const std::vector<rls_source>& sources,
                                 const rls_load_options& options = {});

}  // namespace sluice::envoy
