#pragma once
/// cpp-httplib adapter (header-only): a pre-routing handler that rate-limits every
/// request of an httplib::Server. Include only where <httplib.h> is available.
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <httplib.h>

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

}  // namespace sluice::http::cpp_httplib
