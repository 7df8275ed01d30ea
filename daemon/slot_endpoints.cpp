// /v1/acquire, /v1/release and /v1/renew: a concurrency limit's slots (docs/CONCURRENCY.md).
// A slot acquired here is detached from the limiter and handed to the client by id: the
// client releases it (or renews it while it works), else its lease ends by itself.
#include "service.hpp"

#include <set>
#include <string>

#include <boost/beast/http/field.hpp>
#include <nlohmann/json.hpp>

#include <sluice/concurrency.hpp>
#include <sluice/error.hpp>

#include "complete_on.hpp"
#include "http_responses.hpp"

namespace sluice::daemon {
namespace {

using json = nlohmann::json;

struct slot_call {
  std::string key;
  std::string policy;
  std::string slot;
};

// The body: {"key": string, "policy": string} and, but for /v1/acquire, "slot": string.
// Returns the problem's code and detail, or an empty code when the body is one.
std::pair<std::string_view, std::string> parse_slot_call(std::string_view body, bool takes_slot,
                                                         slot_call& out) {
  // A member given twice is refused (parsers disagree on which one counts), as /v1/check does.
  std::set<std::string> seen;
  bool repeated = false;
  const json::parser_callback_t note_repeats = [&](int depth, json::parse_event_t ev,
                                                   json& parsed) {
    if (ev == json::parse_event_t::key && depth == 1 && parsed.is_string() &&
        !seen.insert(parsed.get<std::string>()).second)
      repeated = true;
    return true;
  };
  const auto j = json::parse(body, note_repeats, false);
  if (j.is_discarded()) return {"malformed_json", "the body is not JSON"};
  if (repeated) return {"invalid_request", "a member is given twice"};
  if (!j.is_object()) return {"invalid_request", "the body must be a JSON object"};
  for (const auto& [name, value] : j.items()) {
    if (name != "key" && name != "policy" && !(takes_slot && name == "slot"))
      return {"invalid_request", "unknown member \"" + name + "\""};
  }
  for (const char* member : {"key", "policy", "slot"}) {
    if (std::string_view(member) == "slot" && !takes_slot) continue;
    auto it = j.find(member);
    if (it == j.end() || !it->is_string())
      return {"invalid_request", "\"" + std::string(member) + "\" must be a string"};
  }
  out.key = j["key"].get<std::string>();
  out.policy = j["policy"].get<std::string>();
  if (takes_slot) out.slot = j["slot"].get<std::string>();
  return {};
}

std::string whole_seconds_up(std::chrono::milliseconds d) {
  return std::to_string(std::max<std::int64_t>(1, (d.count() + 999) / 1000));
}

}  // namespace

void service::handle_slot(const http_request& req, std::string_view endpoint,
                          std::shared_ptr<const runtime> rt, boost::asio::any_io_executor ex,
                          const responder& done) {
  const auto version = req.version();
  auto bad = [&](unsigned status, std::string_view code, const std::string& detail) {
    return done(problem_response(status, code, detail, version));
  };
  if (req.method() != bhttp::verb::post) {
    auto res = problem_response(405, "method_not_allowed",
                                "POST a JSON body to /v1/" + std::string(endpoint), version);
    res.set(bhttp::field::allow, "POST");
    return done(std::move(res));
  }
  if (!is_json_content_type(req)) {
    return bad(415, "unsupported_media_type",
               "Content-Type must be application/json (curl: -H 'Content-Type: application/json')");
  }
  const bool acquire = endpoint == "acquire";
  slot_call call;
  if (auto [code, detail] = parse_slot_call(req.body(), !acquire, call); !code.empty()) {
    return bad(400, code, detail);
  }
  const auto& policies = rt->cfg.concurrency_policies;
  const auto it = policies.find(call.policy);
  if (it == policies.end()) {
    if (rt->rules->find_policy(call.policy)) {
      return bad(400, "rate_policy",
                 "policy \"" + call.policy + "\" is a rate limit: use /v1/check");
    }
    return bad(422, "unknown_policy", "no policy named \"" + call.policy + "\"");
  }
  if (call.key.empty()) return bad(422, "invalid_key", "\"key\" must not be empty");
  if (call.key.size() > max_check_key_size) {
    return bad(422, "key_too_long",
               "\"key\" is longer than " + std::to_string(max_check_key_size) + " bytes");
  }
  if (!acquire && (call.slot.size() != 32 ||
                   call.slot.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)) {
    return bad(422, "invalid_slot", "\"slot\" must be 32 hex digits, as /v1/acquire gave it");
  }
  const auto& p = it->second;
  const auto limiter_key = std::string(slot_key_prefix) + call.policy + ":" + call.key;
  auto& lim = rt->limiter_here();
  const auto start = now();

  if (acquire) {
    lim.async_try_acquire(
        on_backend_thread, limiter_key, p,
        [this, rt, ex, done, name = call.policy, p, start, version](std::error_code ec,
                                                                    slot s) mutable {
          // The client holds it from here: the slot object must not release it.
          const bool held = static_cast<bool>(s);
          const auto in_flight = s.in_flight();
          const auto retry_after = s.retry_after();
          const auto expires_in = s.expires_in();
          const bool degraded = s.degraded();
          const auto backend_error = s.backend_error();
          std::string id = s.detach();
          complete_on(ex, [this, rt = std::move(rt), done = std::move(done), name = std::move(name),
                           p, start, version, ec, held, in_flight, retry_after, expires_in,
                           degraded, backend_error, id = std::move(id)] {
            done.answer([&] {
              metrics_.backend_latency(now() - start);
              if (ec) return problem_response(422, "invalid_input", ec.message(), version);
              if (degraded) {
                metrics_.backend_error(backend_error);
                metrics_.degraded(p.on_failure, name);
              }
              metrics_.slot_event(name, held ? "acquired" : "refused", in_flight);
              json j;
              j["acquired"] = held;
              j["degraded"] = degraded;
              j["in_flight"] = in_flight;
              j["limit"] = p.limit;
              j["policy"] = name;
              if (held) {
                // A degraded `open` slot is held by no backend: nothing to release or renew.
                j["slot"] = id.empty() ? json(nullptr) : json(id);
                j["expires_in_ms"] = expires_in.count();
                return plain(200, json_text(j), "application/json", version);
              }
              j["retry_after_ms"] = retry_after.count();
              auto res = plain(429, json_text(j), "application/json", version);
              res.set(bhttp::field::retry_after, whole_seconds_up(retry_after));
              return res;
            });
          });
        });
    return;
  }

  const auto op = endpoint == "release" ? slot_operation::release : slot_operation::renew;
  lim.async_slot_step(
      on_backend_thread, limiter_key, p, op, call.slot,
      [this, rt, ex, done, name = call.policy, op, start, version](std::error_code ec,
                                                                   slot_reply r) mutable {
        complete_on(ex, [this, rt = std::move(rt), done = std::move(done), name = std::move(name),
                         op, start, version, ec, r] {
          done.answer([&] {
            metrics_.backend_latency(now() - start);
            const bool release = op == slot_operation::release;
            if (ec && is_backend_error(ec)) {
              metrics_.backend_error(ec);
              return problem_response(503, "backend_error",
                                      "the backend failed (" + ec.message() + "); the slot " +
                                          (release ? "may still be held until its lease ends"
                                                   : "may not have been renewed"),
                                      version);
            }
            if (ec) return problem_response(422, "invalid_input", ec.message(), version);
            if (!r.held) {
              if (!release) metrics_.slot_event(name, "renew_failed", r.in_flight);
              return problem_response(404, "slot_not_held",
                                      "no such slot is held: it was released, its lease ended, "
                                      "or it never was one of this key's",
                                      version);
            }
            metrics_.slot_event(name, release ? "released" : "renewed", r.in_flight);
            json j;
            j[release ? "released" : "renewed"] = true;
            j["in_flight"] = r.in_flight;
            j["policy"] = name;
            if (!release) j["expires_in_ms"] = r.expires_in.count();
            return plain(200, json_text(j), "application/json", version);
          });
        });
      });
}

}  // namespace sluice::daemon
