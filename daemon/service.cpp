#include "service.hpp"

#include "admin.hpp"
#include "check_request.hpp"
#include "complete_on.hpp"
#include "safe_log.hpp"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <charconv>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/http/field.hpp>
#include <boost/beast/http/status.hpp>
#include <nlohmann/json.hpp>

#include <sluice/backend_url.hpp>
#include <sluice/error.hpp>
#include <sluice/http/client_ip.hpp>
#include <sluice/http/evaluate.hpp>
#include <sluice/http/headers.hpp>
#include <sluice/memory_backend.hpp>
#include <sluice/redis_backend.hpp>

namespace sluice::daemon {
namespace {

using json = nlohmann::json;
using steady = std::chrono::steady_clock;

constexpr std::string_view auth_prefix = "/v1/auth";

// Beast 1.74 speaks boost::string_view.
std::string_view sv(boost::beast::string_view s) { return {s.data(), s.size()}; }
boost::beast::string_view bsv(std::string_view s) { return {s.data(), s.size()}; }

// The readiness probe's policy: a bucket that is always full again within a millisecond,
// so probing never limits anything and its key expires at once.
policy probe_policy() {
  policy p;
  p.capacity = max_capacity;
  p.refill_per_second = max_refill_per_second;
  p.on_failure = failure_mode::closed;
  return p;
}

std::string_view path_of(std::string_view target) { return target.substr(0, target.find('?')); }

bool is_auth_path(std::string_view path) {
  return path == auth_prefix || (path.starts_with(auth_prefix) && path[auth_prefix.size()] == '/');
}

http_response plain(unsigned status, std::string body, std::string_view type, unsigned version) {
  http_response res{static_cast<bhttp::status>(status), version};
  res.set(bhttp::field::content_type, bsv(type));
  res.set(bhttp::field::cache_control, "no-store");
  res.body() = std::move(body);
  return res;
}

// JSON text and a newline. Strings that came from a request (a target in a 404's detail)
// may hold bytes that are not UTF-8: they become U+FFFD instead of throwing (dump()'s default).
std::string json_text(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

void add_headers(http_response& res, const std::vector<http::header_field>& fields) {
  for (const auto& f : fields) res.set(f.name, f.value);
}

// redis:// or rediss://: the URLs whose backend can run on the server threads (run_on).
bool is_standalone_redis(std::string_view url) {
  const auto scheme = parse_backend_scheme(url);
  return scheme && scheme->kind == backend_kind::redis;
}

bool same_backend(const config& a, const config& b) {
  if (a.backend != b.backend || a.memory_max_keys != b.memory_max_keys) return false;
  // The memory backend has no prefix, timeouts or connections: changing them must not reset
  // its buckets.
  return a.backend == "memory" ||
         (a.key_prefix == b.key_prefix && a.backend_timeout == b.backend_timeout &&
          a.backend_connect_timeout == b.backend_connect_timeout &&
          (!is_standalone_redis(a.backend) ||
           a.redis_connection_per_thread == b.redis_connection_per_thread));
}

template <class Int>
void append_int(std::string& out, Int v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

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

}  // namespace

sluice::backend_stats runtime::backend_stats() const noexcept {
  if (thread_limiters.empty()) return lim->backend_stats();
  sluice::backend_stats sum;
  for (const auto& [io, l] : thread_limiters) {
    const auto s = l->backend_stats();
    sum.in_flight += s.in_flight;
    sum.up = sum.up && s.up;
    sum.script_calls += s.script_calls;
    sum.batched_decisions += s.batched_decisions;
    sum.noscript += s.noscript;
  }
  return sum;
}

sluice::limiter_stats runtime::limiter_stats() const noexcept {
  if (thread_limiters.empty()) return lim->stats();
  sluice::limiter_stats sum;
  for (const auto& [io, l] : thread_limiters) {
    sum.cached_denials_evicted += l->stats().cached_denials_evicted;
  }
  return sum;
}

limiter& runtime::limiter_here() const noexcept {
  for (const auto& [io, l] : thread_limiters) {
    if (io->get_executor().running_in_this_thread()) return *l;
  }
  return *lim;
}

service::service(config c, std::vector<boost::asio::io_context*> workers,
                 std::shared_ptr<const clock> time_source)
    : workers_(std::move(workers)),
      time_source_(std::move(time_source)),
      current_(build(std::move(c), nullptr)),
      rls_(std::make_unique<rls_decider>(metrics_)) {
  metrics_.set_max_rls_series(current_->cfg.envoy_rls.max_metric_series);
}

std::shared_ptr<const runtime> service::current() const {
  std::lock_guard lock(mu_);
  return current_;
}

std::shared_ptr<const runtime> service::build(config c,
                                              const std::shared_ptr<const runtime>& prev) const {
  auto rt = std::make_shared<runtime>();
  rt->rules = std::make_shared<const http::rule_set>(c.policies, c.rules, c.keys);
  rt->memory_backend = c.backend == "memory";
  if (prev && same_backend(prev->cfg, c)) {
    rt->lim = prev->lim;
    rt->thread_limiters = prev->thread_limiters;
  } else {
    memory_options mo;
    mo.max_keys = c.memory_max_keys;
    mo.time_source = time_source_;
    auto mem = make_memory_backend(mo);
    if (rt->memory_backend) {
      rt->lim = std::make_shared<limiter>(mem, mem, time_source_);
    } else {
      redis_options ro;
      ro.url = c.backend;
      ro.key_prefix = c.key_prefix;
      ro.command_timeout = c.backend_timeout;
      ro.connect_timeout = c.backend_connect_timeout;
      // Cluster and Sentinel backends run their own I/O threads (run_on is standalone only).
      const bool standalone = is_standalone_redis(c.backend);
      if (c.redis_connection_per_thread && !standalone) {
        spdlog::warn(
            "redis_connections: per_thread applies to redis:// and rediss:// only; "
            "{} keeps its own connections",
            redacted_url(c.backend));
      }
      if (standalone && c.redis_connection_per_thread && !workers_.empty()) {
        for (auto* io : workers_) {
          auto on_thread = ro;
          on_thread.run_on = io;
          rt->thread_limiters.emplace_back(
              io, std::make_shared<limiter>(make_redis_backend(on_thread.url, on_thread), mem,
                                            time_source_));
        }
        rt->lim = rt->thread_limiters.front().second;
      } else {
        rt->lim = std::make_shared<limiter>(make_redis_backend(ro.url, ro), mem, time_source_);
      }
    }
  }
  rt->cfg = std::move(c);
  return rt;
}

void service::apply(config c) {
  auto prev = current();
  auto next = build(std::move(c), prev);
  metrics_.set_max_rls_series(next->cfg.envoy_rls.max_metric_series);
  std::lock_guard lock(mu_);
  current_ = std::move(next);
}

bool service::reload(const std::string& path, const std::function<void(config&)>& adjust) {
  try {
    auto c = load_config_file(path);
    if (adjust) adjust(c);
    auto prev = current();
    if (c.listen() != prev->cfg.listen() || c.threads != prev->cfg.threads) {
      spdlog::warn("reload: listen and threads take effect only on restart");
    }
    if (c.envoy_rls.enabled() != prev->cfg.envoy_rls.enabled() ||
        (c.envoy_rls.enabled() && c.envoy_rls.listen() != prev->cfg.envoy_rls.listen())) {
      spdlog::warn(
          "reload: envoy_rls's gRPC listener (added, removed or its listen) changes only on "
          "restart; its limits and failure mode apply now");
    }
    if (c.envoy_rls.enabled() && prev->cfg.envoy_rls.enabled() &&
        !(c.envoy_rls.transport == prev->cfg.envoy_rls.transport)) {
      // The gRPC listener's connections were made with the bounds it started with.
      spdlog::warn(
          "reload: envoy_rls's connection limits (max_connections, streams, sizes, timeouts) "
          "change only on restart");
    }
    const auto& tls = c.envoy_rls.tls;
    const auto& was = prev->cfg.envoy_rls.tls;
    if (tls.cert_pem != was.cert_pem || tls.key_pem != was.key_pem ||
        tls.client_ca_pem != was.client_ca_pem) {
      // The credentials are the listener's own, made once: new files need a restart.
      spdlog::warn("reload: envoy_rls.tls (its files or their contents) changes only on restart");
    }
    set_daemon_log_level(spdlog::level::from_str(c.log_level));
    apply(std::move(c));
    metrics_.reload(true);
    spdlog::info("reload: applied {}", path);
    return true;
  } catch (const std::exception& e) {
    metrics_.reload(false);
    spdlog::error("reload: rejected, the previous config keeps serving: {}", e.what());
    return false;
  }
}

std::string_view service::endpoint_of(std::string_view target) noexcept {
  const auto path = path_of(target);
  if (path == "/v1/check") return "check";
  if (path == "/v1/peek") return "peek";
  if (is_auth_path(path)) return "auth";
  if (path == "/v1/reset") return "reset";
  if (path == "/v1/refund") return "refund";
  if (path == "/v1/penalize") return "penalize";
  if (path == "/v1/block") return "block";
  if (path == "/metrics") return "metrics";
  if (path == "/healthz") return "healthz";
  if (path == "/readyz") return "readyz";
  if (path == "/json") return "json";
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
  p.svc->metrics_.request(p.endpoint, res.result_int(), steady::now() - p.start);
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
    p = std::make_shared<pending>(this, std::move(done), steady::now(), endpoint_of(target),
                                  req.version(), req.method() == bhttp::verb::head);
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
  if (endpoint == "healthz")
    return finish(plain(200, "{\"status\":\"ok\"}\n", "application/json", version));
  if (endpoint == "metrics") {
    metrics_.backend_counters(rt->backend_stats());
    metrics_.limiter_counters(rt->limiter_stats());
    return finish(
        plain(200, metrics_.serialize(), "text/plain; version=0.0.4; charset=utf-8", version));
  }
  return handle_ready(req, std::move(rt), ex, finish);
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
  const auto ctype = sv(req[bhttp::field::content_type]);
  auto mime = ctype.substr(0, ctype.find(';'));
  // RFC 9110 allows whitespace around the parameters' ';'.
  while (!mime.empty() && (mime.back() == ' ' || mime.back() == '\t')) mime.remove_suffix(1);
  while (!mime.empty() && (mime.front() == ' ' || mime.front() == '\t')) mime.remove_prefix(1);
  if (!boost::beast::iequals(bsv(mime), "application/json")) {
    // Strict on purpose: text/plain and form bodies are what a browser may send cross-site
    // without a CORS preflight, and no page should spend a client's tokens.
    return bad(415, "unsupported_media_type",
               "Content-Type must be application/json (curl: -H 'Content-Type: application/json')");
  }
  if (parse_error) return bad(400, parse_error->code, parse_error->detail);
  const auto& k = cr.key;
  const auto& policy_name = cr.policy;
  p = rt.rules->find_policy(policy_name);
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

  const auto start = steady::now();
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
  metrics_.backend_latency(steady::now() - start);
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

  const auto start = steady::now();
  const auto deny_status = rt->cfg.deny_status;
  // The keys are derived (the headers read) before this returns: `lookup` may refer to `req`.
  http::async_evaluate(
      on_backend_thread, rt->limiter_here(), rt->rules, facts,
      [this, rt, ex, start, version, deny_status, done, method = facts.method,
       path = facts.path](http::evaluation e) mutable {
        complete_on(
            ex, [this, rt = std::move(rt), start, version, deny_status, done = std::move(done),
                 method = std::move(method), path = std::move(path), e = std::move(e)]() mutable {
              done.answer([&] {
                return auth_response(*rt, start, version, deny_status, method, path, std::move(e));
              });
            });
      });
}

http_response service::auth_response(const runtime& rt, std::chrono::steady_clock::time_point start,
                                     unsigned version, unsigned deny_status,
                                     std::string_view method, std::string_view path,
                                     http::evaluation e) {
  metrics_.backend_latency(steady::now() - start);
  for (const auto& o : e.outcomes) {
    if (o.skipped) {
      metrics_.decision("auth", o.policy, o.rule, "skipped");
      continue;
    }
    if (o.result.degraded) {
      const auto* p = rt.rules->find_policy(o.policy);
      metrics_.backend_error(o.result.backend_error);
      if (p) metrics_.degraded(p->on_failure, o.policy);
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

void service::handle_json(const http_request& req, std::shared_ptr<const runtime> rt,
                          boost::asio::any_io_executor ex, const responder& done) {
  const auto version = req.version();
  if (req.method() != bhttp::verb::post) {
    auto res = problem_response(405, "method_not_allowed",
                                "POST a RateLimitRequest as JSON to /json", version);
    res.set(bhttp::field::allow, "POST");
    return done(std::move(res));
  }
  const auto ctype = sv(req[bhttp::field::content_type]);
  auto mime = ctype.substr(0, ctype.find(';'));
  while (!mime.empty() && (mime.back() == ' ' || mime.back() == '\t')) mime.remove_suffix(1);
  while (!mime.empty() && (mime.front() == ' ' || mime.front() == '\t')) mime.remove_prefix(1);
  if (!boost::beast::iequals(bsv(mime), "application/json")) {
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
  const auto start = steady::now();
  rls_->decide(std::move(rt), std::move(*parsed), ex, [this, done, version, start](rls_answer a) {
    done.answer([&] {
      switch (a.what) {
        case rls_answer::kind::decided: {
          const bool over = a.overall == rls_code::over_limit;
          metrics_.rls_call("json", over ? "over_limit" : "ok", steady::now() - start);
          // As the reference's /json: 429 when over the limit.
          return plain(over ? 429 : 200, json_response(a), "application/json", version);
        }
        case rls_answer::kind::invalid:
          metrics_.rls_call("json", "invalid_argument", steady::now() - start);
          return problem_response(400, "invalid_request", a.why, version);
        case rls_answer::kind::unavailable:
          metrics_.rls_call("json", "unavailable", steady::now() - start);
          return problem_response(503, "backend_error", a.why, version);
        case rls_answer::kind::disabled:
          break;
      }
      return problem_response(404, "not_found", "no such endpoint: /json", version);
    });
  });
}

void service::handle_ready(const http_request& req, std::shared_ptr<const runtime> rt,
                           boost::asio::any_io_executor ex, const responder& done) {
  const auto version = req.version();
  // A real round trip through the limiter: the backend is up if it decided. With a
  // connection per server thread every one is probed, and up means all of them are.
  static const policy probe = probe_policy();
  std::vector<limiter*> lims;
  for (const auto& tl : rt->thread_limiters) lims.push_back(tl.second.get());
  if (lims.empty()) lims.push_back(rt->lim.get());
  struct probes {
    std::size_t left;
    bool all_up = true;
  };
  auto state = std::make_shared<probes>(probes{lims.size()});
  for (auto* lim : lims) {
    // Every completion runs on `ex`, the connection's executor: one at a time.
    lim->async_check(
        on_backend_thread, "sluiced:readyz", probe, 1,
        [this, rt, ex, version, state, done](std::error_code, decision d) {
          complete_on(ex, [this, rt, version, state, done, degraded = d.degraded] {
            state->all_up = state->all_up && !degraded;
            if (--state->left > 0) return;
            done.answer([&] {
              const bool up = state->all_up;
              metrics_.backend_up(up);
              const bool ready = up || rt->cfg.on_backend_failure != failure_mode::closed;
              // Status first, as operators' scripts read it (nlohmann's json sorts keys).
              nlohmann::ordered_json j;
              j["status"] = ready ? "ready" : "not ready";
              j["backend"] = up ? "up" : "unreachable";
              if (!up) {
                j["on_backend_failure"] = std::string(to_string(rt->cfg.on_backend_failure));
              }
              return plain(ready ? 200 : 503, j.dump() + "\n", "application/json", version);
            });
          });
        });
  }
}

}  // namespace sluice::daemon
