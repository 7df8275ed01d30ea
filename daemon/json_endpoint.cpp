// POST /json: Envoy's ShouldRateLimit as JSON (the reference service's endpoint), decided by
// the same rls_decider as the gRPC listener.
#include "service.hpp"

#include <string>

#include <boost/beast/http/field.hpp>

#include "http_responses.hpp"

namespace sluice::daemon {
void service::handle_json(const http_request& req, std::shared_ptr<const runtime> rt,
                          boost::asio::any_io_executor ex, const responder& done) {
  const auto version = req.version();
  if (req.method() != bhttp::verb::post) {
    auto res = problem_response(405, "method_not_allowed",
                                "POST a RateLimitRequest as JSON to /json", version);
    res.set(bhttp::field::allow, "POST");
    return done(std::move(res));
  }
  if (!is_json_content_type(req)) {
    // As /v1/check: no page may spend a client's limits with a form post.
    return done(problem_response(
        415, "unsupported_media_type",
        "Content-Type must be application/json (curl: -H 'Content-Type: application/json')",
        version));
  }
  std::string why;
  auto parsed = parse_json_request(req.body(), why);
  if (!parsed) {
    metrics_.rls_error("", "service_error");
    metrics_.rls_call("json", "invalid_argument", {});
    return done(problem_response(400, "invalid_request",
                                 "the body is not a RateLimitRequest in JSON: " + why, version));
  }
  const auto start = now();
  rls_->decide(std::move(rt), std::move(*parsed), ex, [this, done, version, start](rls_answer a) {
    done.answer([&] {
      switch (a.what) {
        case rls_answer::kind::decided: {
          const bool over = a.overall == rls_code::over_limit;
          metrics_.rls_call("json", over ? "over_limit" : "ok", now() - start);
          // As the reference's /json: 429 when over the limit.
          return plain(over ? 429 : 200, json_response(a), "application/json", version);
        }
        case rls_answer::kind::invalid:
          metrics_.rls_call("json", "invalid_argument", now() - start);
          return problem_response(400, "invalid_request", a.why, version);
        case rls_answer::kind::unavailable:
          metrics_.rls_call("json", "unavailable", now() - start);
          return problem_response(503, "backend_error", a.why, version);
        case rls_answer::kind::disabled:
          break;
      }
      return problem_response(404, "not_found", "no such endpoint: /json", version);
    });
  });
}

}  // namespace sluice::daemon
