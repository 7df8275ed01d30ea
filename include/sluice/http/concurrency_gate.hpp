#pragma once
/// Concurrency limits in the HTTP middleware (docs/CONCURRENCY.md): rules that take a slot
/// of a concurrency_policy before the handler runs and give it back when the response is
/// done, so that at most `limit` requests of one client (or one key) are in the handlers at
/// once. Separate from the rate rules of a rule_set: a server uses either or both.
#include <cstdint>
#include <string>
#include <vector>

#include <sluice/concurrency.hpp>
#include <sluice/http/headers.hpp>
#include <sluice/http/key_spec.hpp>
#include <sluice/http/request.hpp>
#include <sluice/http/rules.hpp>
#include <sluice/limiter.hpp>

namespace sluice::http {

/// One concurrency rule: requests matching `match` take one slot of `policy` under the key
/// that `key` derives (a request it finds no key for is not limited by this rule).
struct concurrency_rule {
  /// Unique in the gate; 1..64 characters of `A-Z a-z 0-9 _ . -`.
  std::string name;
  rule_match match;
  key_spec key;  ///< default: `ip`
  concurrency_policy policy;
};

class gate_pass;
gate_pass enter_concurrency(limiter& lim, const rule_set& rules, const request_facts& req,
                            unsigned deny_status);

/// One request's passage through a concurrency_gate (or a rule_set's concurrency rules): the slots
/// it holds, or the refusal to answer with. Movable. The slots are given back when the pass is
/// destroyed (or release() is called): keep it until the response has been written.
class gate_pass {
 public:
  /// True when the request may go on (every matching rule gave it a slot).
  bool admitted() const noexcept { return response_.allowed; }
  /// Refused: what to answer (the gate's deny status, `Retry-After`, a problem+json body);
  /// admitted: nothing to add (`allowed`, no headers).
  const rate_limit_response& response() const noexcept { return response_; }
  /// The slots held, one per matching rule that found a key, in rule order.
  const std::vector<slot>& slots() const noexcept { return slots_; }
  /// True when a backend failure's failure mode decided any of them.
  bool degraded() const noexcept { return degraded_; }
  /// Gives the slots back now.
  void release() noexcept;

 private:
  friend class concurrency_gate;
  friend gate_pass enter_concurrency(limiter&, const rule_set&, const request_facts&, unsigned);
  rate_limit_response response_;
  std::vector<slot> slots_;
  bool degraded_ = false;
};

/// Concurrency rules and the limiter that holds their slots. Immutable once built;
/// thread-safe.
class concurrency_gate {
 public:
  /// Validates the rules and throws std::invalid_argument with a message naming the rule
  /// (a bad name, a duplicate, an invalid policy), and `deny_status` (400..599).
  concurrency_gate(limiter lim, std::vector<concurrency_rule> rules, key_options options = {},
                   unsigned deny_status = 429);

  /// Takes a slot of every rule matching `req` whose key spec yields a key, in rule order.
  /// When one refuses, the slots taken already are given back and the pass carries the
  /// refusal. The limiter keys are `@gate:<rule>:<key>` ('@' is in no rule name, so no rate
  /// rule's bucket is one of them). Blocks until the backend answers (one round trip per
  /// matching rule); never throws for any request.
  gate_pass enter(const request_facts& req) const;

  const std::vector<concurrency_rule>& rules() const noexcept { return rules_; }

 private:
  limiter lim_;
  std::vector<concurrency_rule> rules_;
  key_options options_;
  unsigned deny_status_;
};

/// The concurrency rules of a rule_set (rules naming a concurrency policy), as
/// concurrency_gate::enter() takes them: a slot of every matching one whose key spec yields
/// a key, in rule order, under the limiter key `@gate:<rule>:<key>`; when one refuses, the
/// slots taken already are given back and the pass carries the refusal (`deny_status`,
/// 400..599: 429, or 503 for "the service is busy"; `Retry-After`; problem+json). Call it
/// after evaluate() allowed the request, and keep the pass until the response is written.
/// Blocks for one round trip per matching rule; never throws for any request. Thread-safe.
gate_pass enter_concurrency(limiter& lim, const rule_set& rules, const request_facts& req,
                            unsigned deny_status = 429);

}  // namespace sluice::http
