#pragma once
/// Rules: which requests a limit applies to, how they are keyed, and with which policy.
#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <sluice/concurrency.hpp>
#include <sluice/http/client_ip.hpp>
#include <sluice/http/key_spec.hpp>
#include <sluice/http/request.hpp>
#include <sluice/policy.hpp>

namespace sluice::http {

/// Which requests a rule applies to. Every given condition must hold.
struct rule_match {
  /// Plain string prefix of the normalized path (see normalize_path(); `/api` matches
  /// `/api`, `/api/x`, `//api/./x` and `/apix`; write `/api/` to exclude the last).
  /// `/` matches every request.
  std::string path_prefix = "/";
  /// Methods (case-insensitive); empty: any method.
  std::vector<std::string> methods;
  /// Hosts (case-insensitive, exact, the port of the request's host is ignored);
  /// empty: any host.
  std::vector<std::string> hosts;

  bool matches(const request_facts& req) const;
};

/// The longest `max_wait` of a concurrency rule: 10 minutes (a waiting request keeps its
/// connection open and a slot of every rule before it).
inline constexpr std::chrono::milliseconds max_gate_wait{600'000};

/// One rule of a rule_set.
struct rule {
  /// Unique in the set; 1..64 characters of `A-Z a-z 0-9 _ . -`.
  std::string name;
  rule_match match;
  key_spec key;  ///< default: `ip`
  /// The name of a policy of the set: a rate policy, or a concurrency policy (then this is
  /// a concurrency rule: enter_concurrency() takes a slot of it per request, held until the
  /// response is written; evaluate() leaves it out).
  std::string policy;
  /// A shadow rule decides, spends its own tokens and is reported, but never denies
  /// (try a limit on real traffic before enforcing it). Rate rules only.
  bool shadow = false;
  /// Units per request: 1..limit_of(the policy) (capacity or limit). A concurrency rule
  /// takes one slot: its cost must be 1.
  std::uint64_t cost = 1;
  /// A concurrency rule: how long a request may wait for a slot (limiter::async_acquire:
  /// in arrival order, woken at once by a release) before it is refused; 0 (the default)
  /// refuses at once; 0..max_gate_wait. A rate rule does not wait: it must be 0.
  std::chrono::milliseconds max_wait{0};
};

/// An immutable, validated set of named policies and ordered rules. Share it as
/// `std::shared_ptr<const rule_set>` and swap the pointer to reload. Thread-safe (const).
class rule_set {
 public:
  /// Validates everything and throws std::invalid_argument with a one-line message that
  /// names the offending policy or rule, e.g.
  /// `rule "api": unknown policy "apx"`, `policy "login": refill_per_second ...`,
  /// `rule "login": cost 10 exceeds the capacity 5 of policy "login"` (or "the limit"),
  /// `duplicate rule name "api"`, `key_options: ipv6_prefix must be 1..128`.
  /// Policy names follow the same character rules as rule names.
  rule_set(std::map<std::string, sluice::policy, std::less<>> policies, std::vector<rule> rules,
           key_options options = {});
  /// The same, with concurrency policies too (docs/CONCURRENCY.md): a rule naming one is a
  /// concurrency rule. A name is a rate policy's or a concurrency policy's, not both;
  /// messages as above (`policy "reports": ...`, `rule "reports": a concurrency rule cannot
  /// be a shadow rule`, `... takes one slot: cost must be 1`, `... max_wait must be
  /// 0..600000 ms`, `rule "api": max_wait is for concurrency rules; a rate rule does not
  /// wait`).
  rule_set(std::map<std::string, sluice::policy, std::less<>> policies,
           std::map<std::string, concurrency_policy, std::less<>> concurrency_policies,
           std::vector<rule> rules, key_options options = {});

  const std::map<std::string, sluice::policy, std::less<>>& policies() const noexcept {
    return policies_;
  }
  const std::vector<rule>& rules() const noexcept { return rules_; }
  const key_options& options() const noexcept { return options_; }

  const std::map<std::string, concurrency_policy, std::less<>>& concurrency_policies()
      const noexcept {
    return concurrency_;
  }
  /// The concurrency policy called `name`, or nullptr.
  const concurrency_policy* find_concurrency_policy(std::string_view name) const noexcept;

  /// The policy called `name`, or nullptr.
  const sluice::policy* find_policy(std::string_view name) const noexcept;
  /// The policy called `name` as validated when the set was built, or nullptr: evaluation
  /// checks only each request's key and cost against it.
  const sluice::valid_policy* find_valid_policy(std::string_view name) const noexcept;

  /// Indices (into rules()) of the rules matching `req`, in order.
  std::vector<std::size_t> matching(const request_facts& req) const;

 private:
  std::map<std::string, sluice::policy, std::less<>> policies_;
  std::map<std::string, sluice::valid_policy, std::less<>> valid_;  // policies_, validated
  std::map<std::string, concurrency_policy, std::less<>> concurrency_;
  std::vector<rule> rules_;
  key_options options_;
};

/// True when `name` is a valid rule or policy name (see rule::name).
bool is_valid_name(std::string_view name) noexcept;

}  // namespace sluice::http
