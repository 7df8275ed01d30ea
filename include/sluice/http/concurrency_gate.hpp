#pragma once
/// Concurrency limits in the HTTP middleware (docs/CONCURRENCY.md): rules that take a slot
/// of a concurrency_policy before the handler runs and give it back when the response is
/// done, so that at most `limit` requests of one client (or one key) are in the handlers at
/// once. Separate from the rate rules of a rule_set: a server uses either or both.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/system_executor.hpp>

#include <sluice/completion.hpp>
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
  /// How long a request may wait for a slot (limiter::async_acquire: in arrival order,
  /// woken by a release) before it is refused: 0 (the default) refuses at once;
  /// at most max_gate_wait.
  std::chrono::milliseconds max_wait{0};
};

class gate_pass;

namespace detail {
/// One slot a request is to take: a matching rule's, under its derived key.
struct gate_step {
  std::string rule;  ///< the rule's name (for the refusal's detail)
  std::string key;   ///< the limiter key, `@gate:<rule>:<key>`
  concurrency_policy policy;
  std::chrono::milliseconds max_wait{0};
};
/// The slots a request is to take, in rule order, and the status a refusal answers.
struct gate_plan {
  std::vector<gate_step> steps;
  unsigned deny_status = 429;
};
gate_plan plan_concurrency(const rule_set& rules, const request_facts& req,
                           unsigned deny_status) noexcept;
/// The one walk of a plan, behind every enter form: takes the steps' slots in order
/// (limiter::async_try_acquire's on_backend_thread form; limiter::async_acquire with its
/// timers on `wait_on` for a step that may wait) and calls `done` once, where the last step
/// completes (inline when nothing had to be asked, on the memory backend, or on the
/// backend's I/O thread or `wait_on`): it must be short and must not block.
void walk_concurrency(limiter lim, gate_plan plan, boost::asio::any_io_executor wait_on,
                      std::function<void(std::error_code, gate_pass)> done) noexcept;
struct gate_walk;
}  // namespace detail

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
  friend struct detail::gate_walk;
  rate_limit_response response_;
  std::vector<slot> slots_;
  bool degraded_ = false;
};

/// Concurrency rules and the limiter that holds their slots. Immutable once built;
/// thread-safe.
class concurrency_gate {
 public:
  /// Validates the rules and throws std::invalid_argument with a message naming the rule
  /// (a bad name, a duplicate, an invalid policy, a max_wait outside 0..max_gate_wait), and
  /// `deny_status` (400..599).
  concurrency_gate(limiter lim, std::vector<concurrency_rule> rules, key_options options = {},
                   unsigned deny_status = 429);

  /// Takes a slot of every rule matching `req` whose key spec yields a key, in rule order.
  /// When one refuses, the slots taken already are given back and the pass carries the
  /// refusal. The limiter keys are `@gate:<rule>:<key>` ('@' is in no rule name, so no rate
  /// rule's bucket is one of them). A rule with a max_wait waits for its slot up to then
  /// (limiter::async_acquire). Blocks until the backend answers (one round trip per
  /// matching rule, more while waiting): not on a thread the backend's I/O runs on. Never
  /// throws for any request.
  gate_pass enter(const request_facts& req) const;

  /// Asynchronous enter(): the keys are derived (and `req.headers` read) before this
  /// returns; then the slots are taken one after the other with
  /// limiter::async_try_acquire (async_acquire for a rule with a max_wait, its timers on
  /// the handler's associated executor). Completion signature
  /// `void(std::error_code, sluice::http::gate_pass)`, the error as
  /// async_enter_concurrency()'s. The handler never runs inline: it is posted to its
  /// associated executor (default: boost::asio::system_executor). `req` and the gate need
  /// only live until this call returns (the walk holds a copy of the limiter handle).
  /// Thread-safe.
  template <class CompletionToken>
  auto async_enter(const request_facts& req, CompletionToken&& token) const;

  const std::vector<concurrency_rule>& rules() const noexcept { return rules_; }

 private:
  detail::gate_plan plan(const request_facts& req) const noexcept;
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
/// A rule with a max_wait (rule::max_wait) waits for its slot up to then before it refuses.
/// async_enter_concurrency(), waited for: blocks this thread (one round trip per matching
/// rule, more while waiting; its wait timers run on Asio's system executor), so not on a
/// thread the backend's I/O runs on. Never throws for any request. Thread-safe.
gate_pass enter_concurrency(limiter& lim, const rule_set& rules, const request_facts& req,
                            unsigned deny_status = 429);

/// Asynchronous enter_concurrency(), for a server whose I/O thread must not wait for the
/// backend: the keys are derived (and `req.headers` read) before this returns; then the
/// slots of the matching concurrency rules are taken one after the other, in rule order,
/// with limiter::async_try_acquire, or limiter::async_acquire for a rule with a max_wait
/// (in arrival order, woken by a release; its timers run on the handler's associated
/// executor). Same pass as enter_concurrency(): when one rule refuses, the slots taken
/// already are given back and the pass carries the refusal. Completion signature
/// `void(std::error_code, sluice::http::gate_pass)`: the error is empty for every
/// request, except std::errc::operation_canceled when every handle to the limiter was
/// destroyed while a rule waited (the pass is then that rule's refusal). The handler never
/// runs inline: it is posted to its associated executor (default:
/// boost::asio::system_executor). `lim`, `rules` and `req` need only live until this call
/// returns. Thread-safe.
template <class CompletionToken>
auto async_enter_concurrency(limiter& lim, const rule_set& rules, const request_facts& req,
                             unsigned deny_status, CompletionToken&& token);

namespace detail {
// Where a waiting rule's timers run: the handler's executor, or (one that is no I/O
// executor, e.g. use_future's) Asio's system executor.
template <class Executor>
boost::asio::any_io_executor wait_executor(const Executor& ex) {
  if constexpr (std::is_constructible_v<boost::asio::any_io_executor, const Executor&>) {
    return boost::asio::any_io_executor(ex);
  } else {
    return boost::asio::any_io_executor(boost::asio::system_executor());
  }
}

// Every async enter form: walks `plan` and posts the pass to the handler's executor.
template <class CompletionToken>
auto initiate_enter(limiter lim, gate_plan plan, CompletionToken&& token) {
  return boost::asio::async_initiate<CompletionToken, void(std::error_code, gate_pass)>(
      [](auto handler, limiter l, gate_plan p) {
        auto ex = boost::asio::get_associated_executor(handler, boost::asio::system_executor());
        walk_concurrency(std::move(l), std::move(p), wait_executor(ex),
                         [parked = sluice::detail::parked_handler(std::move(handler))](
                             std::error_code ec, gate_pass pass) {
                           // A posted completion may be copied (post_completion groups
                           // some in a std::function), a pass cannot: it travels in a
                           // shared_ptr.
                           parked.post([ec, got = std::make_shared<gate_pass>(std::move(pass))](
                                           auto& h) { h(ec, std::move(*got)); });
                         });
      },
      token, std::move(lim), std::move(plan));
}
}  // namespace detail

template <class CompletionToken>
auto async_enter_concurrency(limiter& lim, const rule_set& rules, const request_facts& req,
                             unsigned deny_status, CompletionToken&& token) {
  return detail::initiate_enter(lim, detail::plan_concurrency(rules, req, deny_status),
                                std::forward<CompletionToken>(token));
}

template <class CompletionToken>
auto concurrency_gate::async_enter(const request_facts& req, CompletionToken&& token) const {
  return detail::initiate_enter(lim_, plan(req), std::forward<CompletionToken>(token));
}

}  // namespace sluice::http
