#include <sluice/http/concurrency_gate.hpp>

#include <set>
#include <stdexcept>

namespace sluice::http {
namespace {

// The refusal of `rule`'s slot `s`: the deny status, Retry-After (whole seconds, at least 1:
// "0" would invite a retry loop) and a problem+json body naming the rule.
rate_limit_response refusal(const std::string& rule, std::uint64_t limit, const slot& s,
                            unsigned status) {
  const auto wait = std::max<std::int64_t>(1, ceil_seconds(s.retry_after()).count());
  problem p;
  p.title = status == 429 ? "Too Many Requests" : "Service Unavailable";
  p.status = status;
  p.detail = "Too many requests in flight for rule \"" + rule + "\" (at most " +
             std::to_string(limit) + "); retry in " + std::to_string(wait) +
             (wait == 1 ? " second." : " seconds.");
  p.retry_after = static_cast<std::uint64_t>(wait);
  rate_limit_response r;
  r.allowed = false;
  r.status = status;
  r.headers.push_back({"Retry-After", std::to_string(wait)});
  r.body = to_json(p);
  return r;
}

// Takes `rule`'s slot of `key` into `pass`; false when refused (then `pass` holds the
// refusal and no slot).
bool take(limiter lim, gate_pass& pass, std::vector<slot>& slots, bool& degraded,
          rate_limit_response& response, const std::string& rule, const concurrency_policy& p,
          const std::string& key, unsigned status) {
  std::error_code ec;
  auto s = lim.try_acquire("@gate:" + rule + ":" + key, p, ec);
  if (ec) return true;  // a key over max_key_size: not limited, as a rate rule skips it
  degraded = degraded || s.degraded();
  if (!s) {
    pass.release();
    response = refusal(rule, p.limit, s, status);
    return false;
  }
  slots.push_back(std::move(s));
  return true;
}

}  // namespace

void gate_pass::release() noexcept {
  for (auto& s : slots_) s.release();
  slots_.clear();
}

concurrency_gate::concurrency_gate(limiter lim, std::vector<concurrency_rule> rules,
                                   key_options options, unsigned deny_status)
    : lim_(std::move(lim)),
      rules_(std::move(rules)),
      options_(std::move(options)),
      deny_status_(deny_status) {
  if (deny_status_ < 400 || deny_status_ > 599)
    throw std::invalid_argument("concurrency_gate: deny_status must be 400..599");
  std::set<std::string, std::less<>> names;
  for (const auto& r : rules_) {
    if (!is_valid_name(r.name))
      throw std::invalid_argument("concurrency rule \"" + r.name +
                                  "\": names are 1..64 characters of A-Z a-z 0-9 _ . -");
    if (!names.insert(r.name).second)
      throw std::invalid_argument("duplicate concurrency rule name \"" + r.name + "\"");
    if (auto ec = validate(r.policy))
      throw std::invalid_argument("concurrency rule \"" + r.name + "\": " + ec.message());
  }
}

gate_pass concurrency_gate::enter(const request_facts& req) const {
  gate_pass pass;
  try {
    for (const auto& rule : rules_) {
      if (!rule.match.matches(req)) continue;
      const auto key = rule.key.derive(req, options_);
      if (!key) continue;
      // A copy of the handle: try_acquire is not const, the shared state behind it is.
      if (!take(lim_, pass, pass.slots_, pass.degraded_, pass.response_, rule.name, rule.policy,
                *key, deny_status_)) {
        return pass;
      }
    }
  } catch (...) {
    // No memory, or no random bytes for an id: let the request through, as `open` would.
  }
  return pass;
}

gate_pass enter_concurrency(limiter& lim, const rule_set& rules, const request_facts& req,
                            unsigned deny_status) {
  gate_pass pass;
  if (rules.concurrency_policies().empty()) return pass;          // no work for rate-only sets
  if (deny_status < 400 || deny_status > 599) deny_status = 503;  // never "admit" by mistake
  try {
    for (auto i : rules.matching(req)) {
      const auto& rule = rules.rules()[i];
      const auto* p = rules.find_concurrency_policy(rule.policy);
      if (p == nullptr) continue;  // a rate rule: evaluate()'s
      const auto key = rule.key.derive(req, rules.options());
      if (!key) continue;
      if (!take(lim, pass, pass.slots_, pass.degraded_, pass.response_, rule.name, *p, *key,
                deny_status)) {
        return pass;
      }
    }
  } catch (...) {
    // No memory, or no random bytes for an id: let the request through, as `open` would.
  }
  return pass;
}

}  // namespace sluice::http
