#pragma once
/// Evaluates a request against a rule_set with a sluice::limiter.
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/system_executor.hpp>

#include <sluice/decision.hpp>
#include <sluice/http/request.hpp>
#include <sluice/http/rules.hpp>
#include <sluice/limiter.hpp>

namespace sluice::http {

/// What one matching rule did with the request.
struct rule_outcome {
  std::size_t rule_index = 0;  ///< into rule_set::rules()
  std::string rule;            ///< the rule's name
  std::string policy;          ///< the policy's name
  /// The policy's failure mode: what decided when `result.degraded`.
  failure_mode on_failure = failure_mode::open;
  bool shadow = false;
  /// The limiter key: `<rule>:<policy>:<derived key>`, so two rules never share a bucket.
  /// Empty when the key spec found no identity (then `skipped` is true).
  std::string key;
  /// True when the rule did not decide: its key spec found no identity in the request,
  /// or the limiter rejected the input (`error` set). A skipped rule never denies.
  bool skipped = false;
  std::error_code error;  ///< from limiter::check (invalid input only); normally empty
  decision result;        ///< meaningful only when !skipped
};

/// The result of evaluating one request.
struct evaluation {
  /// False only when a non-shadow matching rule denied.
  bool allowed = true;
  /// Every matching rule, in rule order.
  std::vector<rule_outcome> outcomes;
  /// Index into `outcomes` of the rule whose numbers go into the response headers: the
  /// denying non-shadow rule with the longest retry_after (first on a tie), otherwise the
  /// deciding non-shadow rule with the fewest remaining tokens (first on a tie). Empty
  /// when no non-shadow rule decided (then no rate-limit headers are sent).
  std::optional<std::size_t> binding;
  /// The rule_set the request was evaluated against (keeps the binding policy alive).
  std::shared_ptr<const rule_set> rules;

  /// The binding outcome, or nullptr.
  const rule_outcome* binding_outcome() const noexcept {
    return binding ? &outcomes[*binding] : nullptr;
  }
  /// The binding rule's policy, or nullptr.
  const sluice::policy* binding_policy() const noexcept;
  /// True when any deciding outcome is degraded (backend failure mode applied).
  bool degraded() const noexcept;
};

/// Evaluates `req`: every matching rate rule (concurrency rules are enter_concurrency()'s,
/// in sluice/http/concurrency_gate.hpp) whose key spec yields a key is checked with
/// `lim` (all of them, shadow ones too, so shadow rules spend and count); the request is
/// allowed unless a non-shadow rule denies. The non-shadow rules are decided together with
/// limiter::check_all, all or nothing: when one denies, no rule spends a token (atomic on
/// the memory, Redis and Sentinel backends, and on Redis Cluster when their keys share a
/// slot; see docs/cluster.md otherwise). A rule that would have allowed then reports
/// `result.allowed == true` with its tokens untouched (`remaining` as it is). Shadow rules
/// are each checked on their own and spend whatever the other rules decide. Blocks;
/// thread-safe. Never throws for any request.
evaluation evaluate(limiter& lim, std::shared_ptr<const rule_set> rules, const request_facts& req);

/// The outcomes of the rules matching `req`, in rule order, with their keys derived (and
/// `req.headers` read) but nothing decided yet: what evaluate() will check. Thread-safe.
evaluation plan(std::shared_ptr<const rule_set> rules, const request_facts& req);

/// async_evaluate() of a plan() for callers whose own event loop is not Asio's: decides
/// every planned, non-skipped outcome as evaluate() does, and calls `done` exactly once
/// where the last decision completes, with no hand-off between threads: inline, before
/// this returns (the memory backend, a cached denial, nothing to decide), or on the
/// backend's I/O thread, so `done` must be short and must not block (see
/// limiter::async_check's on_backend_thread form). Thread-safe.
void async_evaluate(on_backend_thread_t, limiter lim, evaluation planned,
                    std::function<void(evaluation)> done);
/// async_evaluate(on_backend_thread, lim, plan(rules, req), done).
void async_evaluate(on_backend_thread_t, limiter lim, std::shared_ptr<const rule_set> rules,
                    const request_facts& req, std::function<void(evaluation)> done);

/// Asynchronous evaluate(): the keys are derived (and `req.headers` read) before this
/// returns, then the non-shadow rules' limiter::async_check_all and each shadow rule's
/// limiter::async_check run concurrently. Completion
/// signature: `void(sluice::http::evaluation)`. The handler never runs inline: it is posted
/// to its associated executor (default: boost::asio::system_executor). `lim` and `req`
/// need only live until this call returns. Thread-safe.
template <class CompletionToken>
auto async_evaluate(limiter& lim, std::shared_ptr<const rule_set> rules, const request_facts& req,
                    CompletionToken&& token) {
  return boost::asio::async_initiate<CompletionToken, void(evaluation)>(
      [](auto handler, limiter l, evaluation planned) {
        async_evaluate(on_backend_thread, std::move(l), std::move(planned),
                       [parked = sluice::detail::parked_handler(std::move(handler))](evaluation e) {
                         parked.post([e = std::move(e)](auto& h) mutable { h(std::move(e)); });
                       });
      },
      token, lim, plan(std::move(rules), req));
}

}  // namespace sluice::http
