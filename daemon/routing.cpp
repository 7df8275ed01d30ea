// Routing: one request to its endpoint (by path, then method), answered exactly once, with
// whatever escapes an endpoint answered 500; the problem+json responses every endpoint uses.
#include "service.hpp"

#include <atomic>
#include <string>

#include <spdlog/spdlog.h>
#include <boost/beast/http/field.hpp>
#include <boost/beast/http/status.hpp>
#include <nlohmann/json.hpp>

#include <sluice/http/headers.hpp>

#include "admin.hpp"
#include "http_responses.hpp"
#include "openapi_document.hpp"

namespace sluice::daemon {
namespace {

using json = nlohmann::json;
using steady = std::chrono::steady_clock;

constexpr std::string_view auth_prefix = "/v1/auth";

bool is_auth_path(std::string_view path) {
  return path == auth_prefix || (path.starts_with(auth_prefix) && path[auth_prefix.size()] == '/');
}

}  // namespace

std::string_view service::endpoint_of(std::string_view target) noexcept {
  const auto path = path_of(target);
  if (path == "/v1/check") return "check";
  if (path == "/v1/peek") return "peek";
  if (is_auth_path(path)) return "auth";
  if (path == "/v1/reset") return "reset";
  if (path == "/v1/refund") return "refund";
  if (path == "/v1/penalize") return "penalize";
  if (path == "/v1/block") return "block";
  if (path == "/v1/acquire") return "acquire";
  if (path == "/v1/release") return "release";
  if (path == "/v1/renew") return "renew";
  if (path == "/metrics") return "metrics";
  if (path == "/healthz") return "healthz";
  if (path == "/readyz") return "readyz";
  if (path == "/json") return "json";
  if (path == "/openapi.json") return "openapi";
  return "other";
}

http_response service::problem_response(unsigned status, std::string_view error,
                                        std::string_view detail, unsigned version) {
  json j;
  j["type"] = "about:blank";
  j["title"] = std::string(bhttp::obsolete_reason(static_cast<bhttp::status>(status)));
  j["status"] = status;
  j["detail"] = std::string(detail);
  j["error"] = std::string(error);
  return plain(status, json_text(j), http::problem_content_type, version);
}

struct service::pending {
  pending(service* s, done_handler d, steady::time_point t, std::string_view e, unsigned v, bool h)
      : svc(s), done(std::move(d)), start(t), endpoint(e), version(v), head(h) {}
  service* svc;
  done_handler done;
  steady::time_point start;
  std::string_view endpoint;
  unsigned version;
  bool head;
  std::atomic<bool> answered{false};
};

void service::responder::operator()(http_response res) const {
  auto& p = *p_;
  if (p.answered.load(std::memory_order_relaxed)) return;
  // HTTP/1.0 is answered in kind; anything else as HTTP/1.1, the version sluiced speaks
  // (RFC 9110 6.2), never an echo of what the client claimed.
  res.version(p.version == 10 ? 10 : 11);
  if (p.head) {
    // The GET response's headers, Content-Length included, without its body.
    const auto n = res.body().size();
    res.body().clear();
    res.content_length(n);
  }
  p.svc->metrics_.request(p.endpoint, res.result_int(), p.svc->now() - p.start);
  if (p.answered.exchange(true)) return;
  p.done(std::move(res));
}

void service::responder::fail(const char* what) const noexcept {
  auto& p = *p_;
  try {
    p.svc->metrics_.internal_error("request");
    if (const auto n = p.svc->internal_errors_log_.admit()) {
      spdlog::error("internal error while answering a request to {}: {} ({} since the last report)",
                    p.endpoint, what, n);
    }
    if (!p.answered.load()) {
      (*this)(problem_response(500, "internal_error",
                               "the request could not be answered; it has been logged", p.version));
    }
  } catch (...) {
    // Out of memory, most likely: the connection closes when `done` is destroyed unanswered.
  }
}

void service::handle(http_request req, std::string peer, boost::asio::any_io_executor ex,
                     done_handler done) noexcept {
  std::shared_ptr<pending> p;
  try {
    const auto target = sv(req.target());
    p = std::make_shared<pending>(this, std::move(done), now(), endpoint_of(target), req.version(),
                                  req.method() == bhttp::verb::head);
  } catch (...) {
    return;  // no memory for the request's state: `done` is destroyed unanswered
  }
  const responder respond(std::move(p));
  try {
    route(req, peer, std::move(ex), respond);
  } catch (const std::exception& e) {
    respond.fail(e.what());
  } catch (...) {
    respond.fail("unknown exception");
  }
}

void service::route(const http_request& req, const std::string& peer,
                    boost::asio::any_io_executor ex, const responder& finish) {
  const auto version = req.version();
  const auto method = req.method();
  const auto endpoint = endpoint_of(sv(req.target()));
  spdlog::debug("{} {} from {}", sv(req.method_string()), sv(req.target()), peer);
  auto rt = current();
  const bool get = method == bhttp::verb::get || method == bhttp::verb::head;
  if (version / 10 != 1) {
    return finish(problem_response(505, "http_version_not_supported",
                                   "sluiced speaks HTTP/1.1 (and HTTP/1.0)", 11));
  }

  auto not_found = [&] {
    return finish(problem_response(
        404, "not_found", "no such endpoint: " + std::string(path_of(sv(req.target()))), version));
  };
  if (endpoint == "check") return handle_check(req, std::move(rt), ex, finish, false);
  if (endpoint == "peek") return handle_check(req, std::move(rt), ex, finish, true);
  if (endpoint == "auth") return handle_auth(req, peer, std::move(rt), ex, finish);
  if (endpoint == "acquire" || endpoint == "release" || endpoint == "renew")
    return handle_slot(req, endpoint, std::move(rt), ex, finish);
  if (auto op = admin_operation(endpoint)) {
    // Off unless the config names a token file: then no different from an unknown path.
    if (!rt->cfg.admin.enabled()) return not_found();
    return handle_admin(req, peer, endpoint, *op, std::move(rt), ex, finish);
  }
  if (endpoint == "json") {
    // Only with an envoy_rls section: otherwise no different from an unknown path.
    if (!rt->cfg.envoy_rls.enabled()) return not_found();
    return handle_json(req, std::move(rt), ex, finish);
  }
  if (endpoint == "other") return not_found();
  if (!get) {
    auto res = problem_response(405, "method_not_allowed", "use GET (or HEAD)", version);
    res.set(bhttp::field::allow, "GET, HEAD");
    return finish(std::move(res));
  }
  if (endpoint == "healthz") return handle_health(req, finish);
  if (endpoint == "openapi") {
    return finish(plain(200, std::string(openapi_document()), "application/json", version));
  }
  if (endpoint == "metrics") return handle_metrics(req, *rt, finish);
  return handle_ready(req, std::move(rt), ex, finish);
}

}  // namespace sluice::daemon
