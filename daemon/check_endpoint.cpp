// /v1/check and /v1/peek: one policy, one key, one call of the limiter; and the checks of a
// request's method, Content-Type and members that the admin endpoints share.
#include "service.hpp"

#include <cassert>
#include <charconv>
#include <string>

#include <boost/beast/http/field.hpp>

#include <sluice/error.hpp>
#include <sluice/http/headers.hpp>

#include "check_request.hpp"
#include "complete_on.hpp"
#include "http_responses.hpp"

namespace sluice::daemon {
namespace {

template <class Int>
void append_int(std::string& out, Int v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

}  // namespace

// /v1/check's answer, as nlohmann::json would dump it (members by name), written directly:
// building a json object took a map node and a string per member for every request.
std::string check_body(const decision& d, const std::string& policy_name) {
  std::string out;
  out.reserve(192 + policy_name.size());  // the longest answer, every number 20 digits
  out += d.allowed ? R"({"allowed":true,"degraded":)" : R"({"allowed":false,"degraded":)";
  out += d.degraded ? "true" : "false";
  out += R"(,"limit":)";
  append_int(out, d.limit);
  out += R"(,"policy":)";
  // The name is one the config defined (find_policy found it), and the config allows only
  // A-Z a-z 0-9 _ . - in names: nothing to escape.
  assert(http::is_valid_name(policy_name));
  out += '"';
  out += policy_name;
  out += '"';
  out += R"(,"remaining":)";
  append_int(out, d.remaining);
  out += R"(,"reset_after_ms":)";
  append_int(out, d.reset_after.count());
  out += R"(,"retry_after_ms":)";
  append_int(out, d.retry_after.count());
  out += "}\n";
  return out;
}

std::optional<http_response> service::refuse_request(
    const http_request& req, const runtime& rt, std::string_view endpoint, const request_members& m,
    const check_request& cr, const std::optional<check_request_error>& parse_error,
    const policy*& p) {
  const auto version = req.version();
  auto bad = [&](unsigned status, std::string_view code, const std::string& detail) {
    return problem_response(status, code, detail, version);
  };
  if (req.method() != bhttp::verb::post) {
    auto res = bad(405, "method_not_allowed", "POST a JSON body to /v1/" + std::string(endpoint));
    res.set(bhttp::field::allow, "POST");
    return res;
  }
  if (!is_json_content_type(req)) {
    // Strict on purpose: text/plain and form bodies are what a browser may send cross-site
    // without a CORS preflight, and no page should spend a client's tokens.
    return bad(415, "unsupported_media_type",
               "Content-Type must be application/json (curl: -H 'Content-Type: application/json')");
  }
  if (parse_error) return bad(400, parse_error->code, parse_error->detail);
  const auto& k = cr.key;
  const auto& policy_name = cr.policy;
  p = rt.rules->find_policy(policy_name);
  if (!p && rt.cfg.concurrency_policies.contains(policy_name)) {
    return bad(400, "concurrency_policy",
               "policy \"" + policy_name +
                   "\" is a concurrency limit: use /v1/acquire, /v1/release and /v1/renew");
  }
  if (!p) return bad(422, "unknown_policy", "no policy named \"" + policy_name + "\"");
  if (k.empty()) return bad(422, "invalid_key", "\"key\" must not be empty");
  if (k.size() > max_check_key_size) {
    return bad(422, "key_too_long",
               "\"key\" is longer than " + std::to_string(max_check_key_size) + " bytes");
  }
  // At most the policy's capacity (buckets) or limit (windows).
  if (m.cost != member_use::refused && (cr.cost < 1 || cr.cost > limit_of(*p))) {
    return bad(422, "cost_out_of_range",
               "\"cost\" must be 1.." + std::to_string(limit_of(*p)) + " (the " +
                   (is_window(p->algorithm) ? "limit" : "capacity") + ") for policy \"" +
                   policy_name + "\"");
  }
  if (m.duration_ms != member_use::refused &&
      (cr.duration_ms < 1 || cr.duration_ms > static_cast<std::uint64_t>(max_window.count()))) {
    return bad(422, "duration_out_of_range",
               "\"duration_ms\" must be 1.." + std::to_string(max_window.count()) + " (366 days)");
  }
  return std::nullopt;
}

void service::handle_check(const http_request& req, std::shared_ptr<const runtime> rt,
                           boost::asio::any_io_executor ex, const responder& done, bool peek) {
  const auto version = req.version();
  const std::string_view endpoint = peek ? "peek" : "check";
  check_request cr;
  const policy* p = nullptr;
  // Only a POST is read (a GET's body, if any, is not worth a parse to answer 405).
  std::optional<check_request_error> parse_error;
  if (req.method() == bhttp::verb::post) parse_error = parse_check_request(req.body(), cr);
  if (auto bad = refuse_request(req, *rt, endpoint, {}, cr, parse_error, p)) {
    return done(std::move(*bad));
  }
  const auto& k = cr.key;
  const auto cost = cr.cost;
  auto& policy_name = cr.policy;

  const auto start = now();
  auto& lim = rt->limiter_here();
  // Each policy has its own buckets: the same key under two policies is two limits. (Built
  // before the call: the handler below takes policy_name by move.)
  // '@' is not allowed in rule names, so no forward-auth rule's `<rule>:<policy>:<key>`
  // bucket can be this one.
  const auto limiter_key = std::string(check_key_prefix) + policy_name + ":" + k;
  // Answered on the connection's executor: at once when the decision completes there
  // (complete_on.hpp), whatever the backend.
  auto answer = [this, rt,  // keeps *p alive
                 ex, endpoint, policy_name = std::move(policy_name), p, start, version,
                 done](std::error_code ec, decision d) mutable {
    complete_on(ex, [this, rt = std::move(rt), endpoint, policy_name = std::move(policy_name), p,
                     start, version, done = std::move(done), ec, d] {
      done.answer([&] { return check_response(endpoint, policy_name, *p, start, version, ec, d); });
    });
  };
  if (peek) {
    lim.async_operate(on_backend_thread, limiter_key, *p, key_operation::peek, cost,
                      std::move(answer));
  } else {
    lim.async_check(on_backend_thread, limiter_key, *p, cost, std::move(answer));
  }
}

http_response service::check_response(std::string_view endpoint, const std::string& policy_name,
                                      const policy& p, std::chrono::steady_clock::time_point start,
                                      unsigned version, std::error_code ec, const decision& d) {
  metrics_.backend_latency(now() - start);
  if (ec) {  // validated before the check; only a bug could get here
    return problem_response(422, "invalid_input", ec.message(), version);
  }
  if (d.degraded) {
    metrics_.backend_error(d.backend_error);
    metrics_.degraded(p.on_failure, policy_name);
  }
  metrics_.decision(endpoint, policy_name, "", d.allowed ? "allowed" : "denied");
  auto res = plain(200, check_body(d, policy_name), "application/json", version);
  add_headers(res, http::rate_limit_headers(d, policy_name, p));
  return res;
}

}  // namespace sluice::daemon
