// The admin endpoints /v1/reset, /v1/refund, /v1/penalize and /v1/block: a bearer token,
// the request checks /v1/check makes, one key operation of the limiter; every call logged
// and counted.
#include "service.hpp"

#include <string>

#include <spdlog/spdlog.h>
#include <boost/beast/http/field.hpp>

#include <sluice/error.hpp>
#include <sluice/http/headers.hpp>

#include "admin.hpp"
#include "check_request.hpp"
#include "complete_on.hpp"
#include "http_responses.hpp"

namespace sluice::daemon {

void service::handle_admin(const http_request& req, const std::string& peer,
                           std::string_view endpoint, key_operation op,
                           std::shared_ptr<const runtime> rt, boost::asio::any_io_executor ex,
                           const responder& done) {
  const auto version = req.version();
  request_members m;
  const bool takes_cost = op == key_operation::refund || op == key_operation::penalize;
  m.cost = takes_cost ? member_use::required : member_use::refused;
  m.duration_ms = op == key_operation::block ? member_use::required : member_use::refused;
  // The body is read before the caller is known only so that the log line can name the key
  // it was about; nothing is acted on until the token matches.
  check_request cr;
  std::optional<check_request_error> parse_error;
  if (req.method() == bhttp::verb::post) parse_error = parse_check_request(req.body(), cr, m);
  admin_call call{endpoint, peer, cr.key, cr.policy, {}};

  const auto creds =
      parse_bearer(req.count(bhttp::field::authorization), sv(req[bhttp::field::authorization]));
  if (creds.what != bearer_credentials::kind::token) {
    auto res = problem_response(
        401, "unauthorized",
        creds.what == bearer_credentials::kind::missing
            ? "this endpoint needs \"Authorization: Bearer <token>\" with the admin token"
            : "the Authorization header must be \"Bearer <token>\", once",
        version);
    res.set(bhttp::field::www_authenticate, "Bearer");
    return done(admin_answer(call, std::move(res), "unauthorized"));
  }
  if (!tokens_equal(creds.token, rt->cfg.admin.token)) {
    return done(admin_answer(
        call,
        problem_response(403, "forbidden", "the bearer token is not the admin token", version),
        "forbidden"));
  }
  const policy* p = nullptr;
  if (auto bad = refuse_request(req, *rt, endpoint, m, cr, parse_error, p)) {
    return done(admin_answer(call, std::move(*bad), "invalid"));
  }
  std::uint64_t amount = 0;
  if (takes_cost) {
    amount = cr.cost;
    call.amount = "cost " + std::to_string(amount);
  } else if (op == key_operation::block) {
    amount = cr.duration_ms;
    call.amount = "duration_ms " + std::to_string(amount);
  }
  // The operations act on /v1/check's buckets.
  const auto limiter_key = std::string(check_key_prefix) + cr.policy + ":" + cr.key;
  rt->lim->async_operate(
      on_backend_thread, limiter_key, *p, op, amount,
      [this, rt, ex, done, call = std::move(call), policy_name = std::move(cr.policy), p, version](
          std::error_code ec, decision d) mutable {
        complete_on(ex, [this, rt = std::move(rt), done = std::move(done), call = std::move(call),
                         policy_name = std::move(policy_name), p, version, ec, d] {
          done.answer([&] {
            auto [res, outcome] = operation_response(policy_name, *p, version, ec, d);
            if (ec && is_backend_error(ec)) metrics_.backend_error(ec);
            return admin_answer(call, std::move(res), outcome);
          });
        });
      });
}

std::pair<http_response, std::string_view> service::operation_response(
    const std::string& policy_name, const policy& p, unsigned version, std::error_code ec,
    const decision& d) {
  if (ec && is_backend_error(ec)) {
    // An operation is not a decision: no failure mode stands in for the backend.
    return {problem_response(503, "backend_error",
                             "the backend failed (" + ec.message() +
                                 "); the operation may not have been applied",
                             version),
            "backend_error"};
  }
  if (ec) {  // validated before the call; only a bug could get here
    return {problem_response(422, "invalid_input", ec.message(), version), "invalid"};
  }
  auto res = plain(200, check_body(d, policy_name), "application/json", version);
  add_headers(res, http::rate_limit_headers(d, policy_name, p));
  return {std::move(res), "ok"};
}

http_response service::admin_answer(const admin_call& call, http_response res,
                                    std::string_view outcome) {
  metrics_.admin_request(call.endpoint, outcome);
  // Every call once, refused ones louder. Never the token; the key last, since it is
  // whatever the caller sent (the daemon's log sink escapes what is not printable).
  const bool refused = outcome == "unauthorized" || outcome == "forbidden";
  const auto level =
      refused || outcome == "backend_error" ? spdlog::level::warn : spdlog::level::info;
  std::string what;
  // A policy name cannot hold ", key ..." and fake the rest of the line; anything else can.
  if (!call.policy.empty()) {
    what += "policy ";
    what += http::is_valid_name(call.policy) ? call.policy : std::string("(not a policy name)");
    what += ", ";
  }
  if (!call.amount.empty()) what += call.amount + ", ";
  what += call.key.empty() ? std::string("no key") : "key " + call.key;
  spdlog::log(level, "admin {} from {}: {} ({}); {}", call.endpoint,
              call.peer.empty() ? std::string_view("unknown peer") : std::string_view(call.peer),
              outcome, res.result_int(), what);
  return res;
}

void service::refused_before_handling(std::string_view endpoint, const std::string& peer,
                                      unsigned status) noexcept {
  try {
    if (!admin_operation(endpoint) || !current()->cfg.admin.enabled()) return;
    admin_answer(admin_call{endpoint, peer, {}, {}, {}},
                 http_response{static_cast<bhttp::status>(status), 11}, "invalid");
  } catch (...) {
    // Logging and counting only: nothing to answer.
  }
}

}  // namespace sluice::daemon
