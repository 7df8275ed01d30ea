#pragma once
/// cpp-httplib adapter (header-only): a pre-routing handler that rate-limits every
/// request of an httplib::Server. Include only where <httplib.h> is available.
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include <httplib.h>

#include <sluice/http/concurrency_gate.hpp>
#include <sluice/http/evaluate.hpp>
#include <sluice/http/headers.hpp>
#include <sluice/http/request.hpp>
#include <sluice/limiter.hpp>

namespace sluice::http::cpp_httplib {

/// Request facts for `req`. The header lookup refers to `req` by reference.
inline request_facts make_request_facts(const ::httplib::Request& req) {
  request_facts f;
  f.peer = req.remote_addr;
  f.method = req.method;
  f.path = req.path.substr(0, req.path.find('?'));
  f.host = req.get_header_value("Host");
  f.headers = [&req](std::string_view name) -> std::optional<std::string> {
    const std::string key(name);
    const auto n = req.get_header_value_count(key);
    if (n == 0) return std::nullopt;
    std::string joined;
    for (std::size_t i = 0; i < n; ++i) {
      if (i) joined += ", ";
      joined += req.get_header_value(key, i);
    }
    return joined;
  };
  return f;
}

/// Applies `r` to `res`: the headers always; for a denial also the status and the
/// problem+json body.
inline void apply(const rate_limit_response& r, ::httplib::Response& res) {
  for (const auto& h : r.headers) res.set_header(h.name, h.value);
  if (!r.allowed) {
    res.status = static_cast<int>(r.status);
    res.set_content(r.body, std::string(problem_content_type));
  }
}

/// A handler for httplib::Server::set_pre_routing_handler: evaluates each request against
/// `rules()` (called per request, so a reload can swap the set) with `lim`; a denied
/// request is answered here (Handled), an allowed one continues to routing (Unhandled)
/// and its response carries the rate-limit headers. httplib runs handlers on several
/// threads at once: `rules` must be safe to call concurrently (e.g. read an atomic
/// shared_ptr). The evaluation blocks that worker thread until the limiter decides.
inline ::httplib::Server::HandlerWithResponse make_pre_routing_handler(
    limiter lim, std::function<std::shared_ptr<const rule_set>()> rules,
    unsigned deny_status = 429) {
  return [lim, rules = std::move(rules), deny_status](
             const ::httplib::Request& req,
             ::httplib::Response& res) mutable -> ::httplib::Server::HandlerResponse {
    const auto e = evaluate(lim, rules(), make_request_facts(req));
    const auto r = make_response(e, deny_status);
    apply(r, res);
    return r.allowed ? ::httplib::Server::HandlerResponse::Unhandled
                     : ::httplib::Server::HandlerResponse::Handled;
  };
}

/// The concurrency slots of the requests an httplib::Server is serving, from its
/// pre-routing handler (make_pre_routing_handler with `held`) to its logger (make_logger),
/// which httplib calls once the response has been written. Thread-safe.
class held_passes {
 public:
  /// Keeps `pass` until release(req). Nothing is kept for a pass without slots.
  void hold(const ::httplib::Request& req, gate_pass pass) {
    if (pass.slots().empty()) return;
    std::lock_guard lock(mu_);
    passes_.insert_or_assign(&req, std::move(pass));
  }
  /// Gives back the slots of `req`'s pass (outside the lock: a release may wake a waiter).
  void release(const ::httplib::Request& req) noexcept {
    gate_pass done;
    {
      std::lock_guard lock(mu_);
      auto it = passes_.find(&req);
      if (it == passes_.end()) return;
      done = std::move(it->second);
      passes_.erase(it);
    }
  }
  /// Requests holding slots now.
  std::size_t size() const {
    std::lock_guard lock(mu_);
    return passes_.size();
  }

 private:
  mutable std::mutex mu_;
  // httplib keeps a Request at one address from routing to logging: the address is its id.
  std::unordered_map<const ::httplib::Request*, gate_pass> passes_;
};

/// make_pre_routing_handler() that also enforces the rule set's concurrency rules: a
/// request the rate rules allow then takes its slots (enter_concurrency); refused, it is
/// answered here with `concurrency_deny_status` (429, or 503), `Retry-After` and
/// problem+json; admitted, its slots are kept in `held` until the logger made by
/// make_logger(held) runs, after httplib has written the response. Install both, e.g.
/// with install(). A request httplib never logs (it does for every routed request) keeps
/// its slots until their leases end.
inline ::httplib::Server::HandlerWithResponse make_pre_routing_handler(
    limiter lim, std::function<std::shared_ptr<const rule_set>()> rules,
    std::shared_ptr<held_passes> held, unsigned deny_status = 429,
    unsigned concurrency_deny_status = 429) {
  return
      [lim, rules = std::move(rules), held = std::move(held), deny_status, concurrency_deny_status](
          const ::httplib::Request& req,
          ::httplib::Response& res) mutable -> ::httplib::Server::HandlerResponse {
        const auto set = rules();
        const auto facts = make_request_facts(req);
        const auto r = make_response(evaluate(lim, set, facts), deny_status);
        apply(r, res);
        if (!r.allowed) return ::httplib::Server::HandlerResponse::Handled;
        if (!set) return ::httplib::Server::HandlerResponse::Unhandled;
        auto pass = enter_concurrency(lim, *set, facts, concurrency_deny_status);
        if (!pass.admitted()) {
          apply(pass.response(), res);
          return ::httplib::Server::HandlerResponse::Handled;
        }
        held->hold(req, std::move(pass));
        return ::httplib::Server::HandlerResponse::Unhandled;
      };
}

/// A logger for httplib::Server::set_logger that gives back the slots `held` keeps for the
/// request, then calls `next` (your own logger, if any).
inline ::httplib::Logger make_logger(std::shared_ptr<held_passes> held,
                                     ::httplib::Logger next = nullptr) {
  return [held = std::move(held), next = std::move(next)](const ::httplib::Request& req,
                                                          const ::httplib::Response& res) {
    held->release(req);
    if (next) next(req, res);
  };
}

/// Installs the rule set's rate and concurrency rules on `server`: its pre-routing handler
/// and its logger (wrapping `next`). Returns the slots held, for inspection.
inline std::shared_ptr<held_passes> install(::httplib::Server& server, limiter lim,
                                            std::function<std::shared_ptr<const rule_set>()> rules,
                                            unsigned deny_status = 429,
                                            unsigned concurrency_deny_status = 429,
                                            ::httplib::Logger next = nullptr) {
  auto held = std::make_shared<held_passes>();
  server.set_pre_routing_handler(make_pre_routing_handler(std::move(lim), std::move(rules), held,
                                                          deny_status, concurrency_deny_status));
  server.set_logger(make_logger(held, std::move(next)));
  return held;
}

}  // namespace sluice::http::cpp_httplib
