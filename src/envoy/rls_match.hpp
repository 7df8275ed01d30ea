#pragma once
/// Matching a ShouldRateLimit request's descriptors against an rls_config, as the reference
/// service does (envoyproxy/ratelimit: GetLimit and the service's replaces pass), and naming
/// the Sluice bucket each matched limit counts in. Pure code: no I/O, no clock.
#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <sluice/policy.hpp>

#include "envoy/rls_config.hpp"

namespace sluice::envoy {

/// envoy.extensions.common.ratelimit.v3.RateLimitDescriptor.Entry
struct rls_entry {
  std::string key;
  std::string value;
};

/// RateLimitDescriptor.RateLimitOverride: the request brings its own limit.
struct rls_override {
  std::uint32_t requests_per_unit = 0;
  rls_unit unit = rls_unit::unknown;
};

/// One descriptor of a request.
struct rls_descriptor {
  std::vector<rls_entry> entries;
  std::optional<rls_override> limit;
  std::optional<std::uint64_t> hits_addend;  ///< overrides the request's hits_addend
};

/// What applies to one request descriptor.
struct rls_match {
  /// A limit applies: check `policy` on `bucket_key`. False when nothing matched, when the
  /// limit is `unlimited`, or when another matched limit `replaces` it.
  bool matched = false;
  bool unlimited = false;      ///< an `unlimited` limit matched: OK, nothing counted
  bool replaced = false;       ///< a limit matched but another matched limit's `replaces` names it
  bool shadow_mode = false;    ///< decide and count, but never answer OVER_LIMIT for it
  bool quota_mode = false;     ///< copied from the config node
  bool from_override = false;  ///< the request's own `limit` (config not consulted)
  std::string name;            ///< the limit's `name:` (empty when none)
  std::uint32_t requests_per_unit = 0;
  rls_unit unit = rls_unit::unknown;
  /// What to check. Valid (sluice::validate) whenever `matched` and requests_per_unit > 0.
  /// requests_per_unit == 0 is a limit nothing fits: answer OVER_LIMIT without a backend.
  sluice::policy policy;
  /// The counter's key (bucket_key() below); empty unless `matched`.
  std::string bucket_key;
  /// The reference's stat key ("domain.key_value.key2"), for per-descriptor metrics; set
  /// whenever a limit matched (also unlimited / replaced), empty otherwise.
  std::string metric_key;
  /// Why the descriptor cannot be decided (e.g. an override with unit UNKNOWN, which the
  /// reference cannot count either); empty otherwise. matched is false when set.
  std::string error;
  /// The matched config node; nullptr for no match and for overrides. Points into the
  /// rls_config passed in: valid as long as it is.
  const rls_descriptor_config* config = nullptr;
};

/// How bucket keys carry a Redis Cluster hash tag (`{...}`: only what is inside the first
/// braces picks the slot). check_all is atomic only for keys on one slot, so this decides
/// whether a request's descriptors can be decided all-or-nothing on Cluster.
enum class rls_key_tag {
  /// `{domain}`: every bucket of a domain on one slot, so every request (whose descriptors
  /// all share its domain) is one atomic step on Cluster too. The domain's load sits on one
  /// node; use several domains to spread it.
  domain,
  /// No tag: buckets spread over the whole cluster by their full key; a request whose
  /// descriptors land on different slots is decided per slot (not all-or-nothing).
  none,
};

struct rls_match_options {
  rls_key_tag tag = rls_key_tag::domain;
};

/// The counter key of one bucket: deterministic, injective (different inputs never give the
/// same key), and printable. Shape:
///   `rls:{<domain>}:<key>=<value>:<key>=<value>:<algorithm>:<window ms>`
/// (without the braces for rls_key_tag::none) where domain, keys and values are
/// percent-escaped: every byte other than [A-Za-z0-9._~*/-] becomes %XX, so `:`, `=`, `{`, `}`
/// and `%` only ever appear as separators and the key parses back uniquely. The algorithm
/// and window are part of the key so that changing either starts a fresh bucket instead of
/// reading another algorithm's state. A very long descriptor can exceed
/// sluice::max_key_size; the limiter then refuses the check as invalid (an error answer).
std::string bucket_key(std::string_view domain, std::span<const rls_entry> entries,
                       sluice::algorithm algorithm, std::chrono::milliseconds window,
                       rls_key_tag tag = rls_key_tag::domain);

/// One rls_match per descriptor, in request order. Per descriptor, as the reference:
///  - unknown domain: nothing matches;
///  - a request `limit` override: a fixed_window of requests_per_unit per unit, keyed by the
///    request's entries; the config is not consulted (no shadow mode, no name). An override
///    with unit unknown matches nothing (the reference cannot count it either);
///  - else walk the tree entry by entry: at each level the exact key/value, else the first
///    wildcard (config order) whose prefix the value starts with, else the key-only
///    descriptor; a limit applies only if the node matched at the request's last entry has
///    one (a request deeper than the config, or stopping above a limit, matches nothing);
///  - `unlimited`: unlimited = true, matched = false;
///  - then across the request: a matched limit whose `name` is in any other matched limit's
///    `replaces` is dropped (replaced = true, matched = false).
/// The bucket uses the request's values, except at a wildcard level with share_threshold,
/// where the config's value (`prefix*`) is used so every matching value shares one bucket.
std::vector<rls_match> match_descriptors(const rls_config& config, std::string_view domain,
                                         std::span<const rls_descriptor> descriptors,
                                         const rls_match_options& options = {});

}  // namespace sluice::envoy
