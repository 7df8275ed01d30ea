#include <sluice/http/rules.hpp>

#include <set>
#include <stdexcept>

#include "http/text.hpp"

namespace sluice::http {
namespace {

[[noreturn]] void invalid(const std::string& msg) { throw std::invalid_argument(msg); }

std::string quoted(std::string_view s) { return "\"" + std::string(s) + "\""; }

}  // namespace

bool is_valid_name(std::string_view name) noexcept {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    const bool ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                    c == '_' || c == '.' || c == '-';
    if (!ok) return false;
  }
  return true;
}

bool rule_match::matches(const request_facts& req) const {
  if (!normalize_path(req.path).starts_with(path_prefix)) return false;
  if (!methods.empty()) {
    bool any = false;
    for (const auto& m : methods) any = any || detail::iequals(m, req.method);
    if (!any) return false;
  }
  if (!hosts.empty()) {
    const auto h = detail::host_only(req.host);
    bool any = false;
    for (const auto& allowed : hosts) any = any || detail::iequals(allowed, h);
    if (!any) return false;
  }
  return true;
}

rule_set::rule_set(std::map<std::string, sluice::policy, std::less<>> policies,
                   std::vector<rule> rules, key_options options)
    : rule_set(std::move(policies), {}, std::move(rules), std::move(options)) {}

rule_set::rule_set(std::map<std::string, sluice::policy, std::less<>> policies,
                   std::map<std::string, concurrency_policy, std::less<>> concurrency_policies,
                   std::vector<rule> rules, key_options options)
    : policies_(std::move(policies)),
      concurrency_(std::move(concurrency_policies)),
      rules_(std::move(rules)),
      options_(std::move(options)) {
  if (options_.ipv6_prefix < 1 || options_.ipv6_prefix > 128) {
    invalid("key_options: ipv6_prefix must be 1..128, not " + std::to_string(options_.ipv6_prefix));
  }
  if (options_.ipv4_prefix < 1 || options_.ipv4_prefix > 32) {
    invalid("key_options: ipv4_prefix must be 1..32, not " + std::to_string(options_.ipv4_prefix));
  }
  for (const auto& [name, p] : policies_) {
    if (!is_valid_name(name)) {
      invalid("policy " + quoted(name) + ": a name is 1..64 characters of A-Z a-z 0-9 _ . -");
    }
    std::error_code ec;
    auto v = valid_policy::make(p, ec);
    if (!v) invalid("policy " + quoted(name) + ": " + ec.message());
    valid_.emplace(name, *v);
  }
  for (const auto& [name, p] : concurrency_) {
    if (!is_valid_name(name)) {
      invalid("policy " + quoted(name) + ": a name is 1..64 characters of A-Z a-z 0-9 _ . -");
    }
    // One name, one kind: a rule's `policy` must say which limit it is.
    if (policies_.contains(name)) {
      invalid("policy " + quoted(name) + ": both a rate and a concurrency policy");
    }
    if (auto ec = validate(p)) invalid("policy " + quoted(name) + ": " + ec.message());
  }
  std::set<std::string, std::less<>> names;
  for (const auto& r : rules_) {
    const auto what = "rule " + quoted(r.name) + ": ";
    if (!is_valid_name(r.name)) {
      invalid(what + "a name is 1..64 characters of A-Z a-z 0-9 _ . -");
    }
    if (!names.insert(r.name).second) invalid("duplicate rule name " + quoted(r.name));
    const auto* p = find_policy(r.policy);
    if (find_concurrency_policy(r.policy)) {
      // A slot is held or not: no cost to spend, and no way to hold one "in shadow"
      // without limiting (a shadow slot would still count against the limit).
      if (r.shadow) invalid(what + "a concurrency rule cannot be a shadow rule");
      if (r.cost != 1) invalid(what + "a concurrency rule takes one slot: cost must be 1");
      if (r.max_wait < std::chrono::milliseconds{0} || r.max_wait > max_gate_wait) {
        invalid(what + "max_wait must be 0.." + std::to_string(max_gate_wait.count()) +
                " ms, not " + std::to_string(r.max_wait.count()));
      }
    } else if (!p) {
      invalid(what + "unknown policy " + quoted(r.policy));
    } else if (r.max_wait != std::chrono::milliseconds{0}) {
      invalid(what + "max_wait is for concurrency rules; a rate rule does not wait");
    }
    if (r.cost < 1) invalid(what + "cost must be at least 1");
    // A request may cost at most a bucket's capacity or a window's limit.
    if (p && r.cost > limit_of(*p)) {
      invalid(what + "cost " + std::to_string(r.cost) + " exceeds the " +
              (is_window(p->algorithm) ? "limit " : "capacity ") + std::to_string(limit_of(*p)) +
              " of policy " + quoted(r.policy));
    }
    if (!r.match.path_prefix.starts_with('/')) {
      invalid(what + "path_prefix must start with '/', not " + quoted(r.match.path_prefix));
    }
    // Requests are matched by their normalized path, so a prefix that is not normalized
    // itself could never match.
    if (const auto n = normalize_path(r.match.path_prefix); n != r.match.path_prefix) {
      invalid(what + "path_prefix " + quoted(r.match.path_prefix) + " is not a normalized path (" +
              quoted(n) + " would match)");
    }
    for (const auto& m : r.match.methods) {
      if (!detail::is_token(m)) invalid(what + "method " + quoted(m) + " is not a valid method");
    }
    for (const auto& h : r.match.hosts) {
      if (detail::trim(h).empty()) invalid(what + "a host is empty");
    }
    if (r.key.alternatives().empty()) invalid(what + "key has no alternative");
  }
}

const sluice::policy* rule_set::find_policy(std::string_view name) const noexcept {
  const auto it = policies_.find(name);
  return it == policies_.end() ? nullptr : &it->second;
}

const concurrency_policy* rule_set::find_concurrency_policy(std::string_view name) const noexcept {
  const auto it = concurrency_.find(name);
  return it == concurrency_.end() ? nullptr : &it->second;
}

const sluice::valid_policy* rule_set::find_valid_policy(std::string_view name) const noexcept {
  const auto it = valid_.find(name);
  return it == valid_.end() ? nullptr : &it->second;
}

std::vector<std::size_t> rule_set::matching(const request_facts& req) const {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < rules_.size(); ++i) {
    if (rules_[i].match.matches(req)) out.push_back(i);
  }
  return out;
}

}  // namespace sluice::http
