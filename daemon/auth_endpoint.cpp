// /v1/auth: forward auth (nginx auth_request, Traefik, Envoy ext_authz over HTTP). The
// request's facts (trusted proxy headers or its own), the rules' plan, one evaluation by the
// limiter (http::async_evaluate) and the answer.
#include "service.hpp"

#include <initializer_list>
#include <string>

#include <spdlog/spdlog.h>
#include <boost/beast/http/field.hpp>

#include <sluice/http/client_ip.hpp>
#include <sluice/http/evaluate.hpp>
#include <sluice/http/headers.hpp>

#include "complete_on.hpp"
#include "http_responses.hpp"

namespace sluice::daemon {
namespace {

constexpr std::string_view auth_prefix = "/v1/auth";

}  // namespace

void service::handle_auth(const http_request& req, const std::string& peer,
                          std::shared_ptr<const runtime> rt, boost::asio::any_io_executor ex,
                          const responder& done) {
  const auto version = req.version();
  // Headers of the auth request itself; repeated fields joined in order (RFC 9110 5.3).
  auto lookup = [&req](std::string_view name) -> std::optional<std::string> {
    auto [it, end] = req.equal_range(bsv(name));
    if (it == end) return std::nullopt;
    std::string v(it->value());
    for (++it; it != end; ++it) {
      v += ", ";
      v += sv(it->value());
    }
    return v;
  };
  auto first_of = [&](std::initializer_list<std::string_view> names) -> std::optional<std::string> {
    for (auto n : names) {
      if (auto v = lookup(n); v && !v->empty()) return v;
    }
    return std::nullopt;
  };

  const auto& opts = rt->rules->options();
  const auto peer_ip = http::parse_ip(peer);
  // What the proxy says about the original request counts only when the proxy is trusted;
  // anyone else is described by its own request (path after /v1/auth, method, Host).
  const bool trusted = peer_ip && http::is_trusted(*peer_ip, opts);

  http::request_facts facts;
  facts.peer = peer;
  facts.method = std::string(sv(req.method_string()));
  auto path = path_of(sv(req.target())).substr(auth_prefix.size());
  std::string uri = path.empty() ? std::string("/") : std::string(path);
  facts.host = std::string(sv(req[bhttp::field::host]));
  if (trusted) {
    if (auto m = first_of({"X-Forwarded-Method", "X-Original-Method"})) facts.method = *m;
    if (auto u = first_of({"X-Forwarded-Uri", "X-Original-URI"})) uri = *u;
    if (auto h = first_of({"X-Forwarded-Host"})) facts.host = *h;
  }
  facts.path = std::string(path_of(uri));
  // An absolute-form URI (`http://host/x`, RFC 9112 3.2.2) stays as it is: rule matching
  // normalizes it to its path. Anything else that lacks the leading '/' gets one.
  if (facts.path.empty() ||
      (facts.path.front() != '/' && facts.path.find("://") == std::string::npos)) {
    facts.path.insert(0, "/");
  }
  facts.headers = lookup;

  const auto start = now();
  const auto deny_status = rt->cfg.deny_status;
  // The keys are derived (the headers read) before this returns: `lookup` may refer to `req`.
  http::async_evaluate(
      on_backend_thread, rt->limiter_here(), rt->rules, facts,
      // `rt` lives until the evaluation is done (the limiter is the runtime's); the answer
      // needs only what the evaluation holds.
      [this, rt, ex, start, version, deny_status, done, method = facts.method,
       path = facts.path](http::evaluation e) mutable {
        complete_on(
            ex, [this, start, version, deny_status, done = std::move(done),
                 method = std::move(method), path = std::move(path), e = std::move(e)]() mutable {
              done.answer([&] {
                return auth_response(start, version, deny_status, method, path, std::move(e));
              });
            });
      });
}

http_response service::auth_response(std::chrono::steady_clock::time_point start, unsigned version,
                                     unsigned deny_status, std::string_view method,
                                     std::string_view path, http::evaluation e) {
  metrics_.backend_latency(now() - start);
  for (const auto& o : e.outcomes) {
    if (o.skipped) {
      metrics_.decision("auth", o.policy, o.rule, "skipped");
      continue;
    }
    if (o.result.degraded) {
      metrics_.backend_error(o.result.backend_error);
      metrics_.degraded(o.on_failure, o.policy);
    }
    std::string_view result = o.result.allowed ? "allowed" : "denied";
    if (o.shadow && !o.result.allowed) {
      result = "shadow_denied";
      // Debug only, and without the key: this runs for every request a shadow rule would
      // refuse (metrics count them), and keys can hold API keys or tokens.
      spdlog::debug("shadow rule {} would deny {} {}", o.rule, method, path);
    }
    metrics_.decision("auth", o.policy, o.rule, result);
  }
  auto r = http::make_response(e, deny_status);
  http_response res;
  if (r.allowed) {
    res = plain(200, "", "text/plain", version);
  } else {
    res = plain(r.status, std::move(r.body), http::problem_content_type, version);
  }
  add_headers(res, r.headers);
  return res;
}

}  // namespace sluice::daemon
