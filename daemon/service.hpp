#pragma once
// The daemon's request handling, apart from sockets: routes one parsed HTTP request to
// /v1/check, /v1/peek, /v1/auth, the admin endpoints (/v1/reset, /v1/refund, /v1/penalize,
// /v1/block), /json, /metrics, /healthz or /readyz and produces the response. The server
// (server.hpp) owns connections and calls service::handle for each request.
//
// One file per concern implements it:
//   runtime.cpp           the runtime in force: building it (backend, limiters), reload
//   routing.cpp           handle(): one request to its endpoint, answered once; problem+json
//   check_endpoint.cpp    /v1/check and /v1/peek, and the request checks the admin calls share
//   admin_endpoints.cpp   /v1/reset, /v1/refund, /v1/penalize, /v1/block
//   auth_endpoint.cpp     /v1/auth (forward auth by the rules)
//   json_endpoint.cpp     POST /json (Envoy's ShouldRateLimit as JSON)
//   slot_endpoints.cpp    /v1/acquire, /v1/release, /v1/renew (concurrency limits)
//   health_endpoints.cpp  /healthz, /readyz and /metrics
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include <sluice/http/evaluate.hpp>
#include <sluice/http/rules.hpp>
#include <sluice/limiter.hpp>

#include "check_request.hpp"
#include "config.hpp"
#include "envoy_rls.hpp"
#include "log_throttle.hpp"
#include "metrics.hpp"
#include "runtime.hpp"

namespace sluice::daemon {

namespace bhttp = boost::beast::http;
using http_request = bhttp::request<bhttp::string_body>;
using http_response = bhttp::response<bhttp::string_body>;

/// /v1/check's limiter keys are `@check:<policy>:<key>` (policies have separate buckets);
/// forward-auth rules' are `<rule>:<policy>:<key>`, and rule names never contain '@'.
inline constexpr std::string_view check_key_prefix = "@check:";
/// /v1/acquire's (and /v1/release's, /v1/renew's) limiter keys: `@slots:<policy>:<key>`.
inline constexpr std::string_view slot_key_prefix = "@slots:";
/// The longest `key` /v1/check accepts, in bytes: the limiter key must fit in
/// sluice::max_key_size with a policy name of up to 64 characters.
inline constexpr std::size_t max_check_key_size = 900;

/// Thread-safe.
class service {
 public:
  /// Builds the first runtime. `workers`: the server threads' io_contexts (each run by one
  /// thread, outliving the service), on which a standalone Redis backend's connections run;
  /// none: the backend runs its own I/O thread. Throws std::invalid_argument when the
  /// backend cannot be created (e.g. a malformed redis:// URL). `time_source` (default:
  /// steady_clock) times the memory backend, the over-limit cache and the latency metrics
  /// (now()): tests and fuzz targets pass a manual clock so that nothing they see depends
  /// on the machine.
  explicit service(config c, std::vector<boost::asio::io_context*> workers = {},
                   std::shared_ptr<const clock> time_source = nullptr);

  /// The runtime in force now. Takes no lock: on a server thread (one of `workers`) it is
  /// that thread's own copy, taken again only after a reload published a newer runtime (one
  /// atomic load per call); on any other thread it is read under a mutex.
  /// After apply(), each server thread takes the new runtime at its next request or at the
  /// refresh apply() posts to it, whichever comes first.
  std::shared_ptr<const runtime> current() const;

  /// Replaces the runtime with one for `c` (listen address and threads are start-up only).
  void apply(config c);

  /// SIGHUP: reads `path` and passes it through `adjust` (the command line's overrides); a
  /// valid config replaces the current one, an invalid one is logged and the current one
  /// keeps serving. Returns whether it was applied.
  bool reload(const std::string& path, const std::function<void(config&)>& adjust = {});

  using done_handler = std::function<void(http_response)>;

  /// Answers `req` from `peer` (an IP address as text). `done` is called at most once,
  /// either inline or from `ex` (the connection's strand), and must not throw. Whatever the
  /// request holds, nothing escapes: an exception while answering it (a bug) is logged once
  /// per burst, counted in `sluice_internal_errors_total`, and answered with a 500
  /// problem+json; when even that cannot be built, `done` is destroyed without being
  /// called (the connection's session then closes the connection).
  void handle(http_request req, std::string peer, boost::asio::any_io_executor ex,
              done_handler done) noexcept;

  /// Now on the service's clock (`time_source`, else steady_clock), for latencies: only
  /// differences of two of these mean anything (the epoch is the clock's own).
  std::chrono::steady_clock::time_point now() const noexcept {
    if (!time_source_) return std::chrono::steady_clock::now();
    return std::chrono::steady_clock::time_point(
        std::chrono::duration_cast<std::chrono::steady_clock::duration>(time_source_->now()));
  }

  metrics& stats() noexcept { return metrics_; }
  /// Envoy RLS decisions (the gRPC listener and POST /json).
  rls_decider& rls() noexcept { return *rls_; }

  /// The endpoint label used in metrics for `target`: `check`, `peek`, `auth`, `acquire`,
  /// `release`, `renew`, `reset`, `refund`, `penalize`, `block`, `json` (Envoy RLS),
  /// `metrics`, `healthz`, `readyz` or `other`.
  static std::string_view endpoint_of(std::string_view target) noexcept;

  /// The server answered a request to `endpoint` from `peer` itself, before handle() (a body
  /// over limits.max_body_bytes: `status` 413): an admin call is logged and counted all the
  /// same. Any other endpoint is ignored.
  void refused_before_handling(std::string_view endpoint, const std::string& peer,
                               unsigned status) noexcept;

  /// A problem+json response (RFC 9457): type `about:blank`, the status's reason phrase as
  /// title, `detail`, and an `error` extension member with a stable machine-readable code.
  static http_response problem_response(unsigned status, std::string_view error,
                                        std::string_view detail, unsigned version = 11);

 private:
  struct pending;
  /// Answers one request exactly once; copies share the request (a completion handler
  /// holds one). Calls after the first are ignored.
  class responder {
   public:
    explicit responder(std::shared_ptr<pending> p) noexcept : p_(std::move(p)) {}
    void operator()(http_response res) const;
    /// Answers with `make()`, or with a 500 when it (or answering) throws. Never throws.
    template <class Make>
    void answer(Make&& make) const noexcept {
      try {
        (*this)(std::forward<Make>(make)());
      } catch (const std::exception& e) {
        fail(e.what());
      } catch (...) {
        fail("unknown exception");
      }
    }
    /// For an exception caught while answering: logs (once per burst), counts, and
    /// answers 500 unless the request was answered already.
    void fail(const char* what) const noexcept;

   private:
    std::shared_ptr<pending> p_;
  };

  void route(const http_request& req, const std::string& peer, boost::asio::any_io_executor ex,
             const responder& done);
  std::shared_ptr<const runtime> build(config c, const std::shared_ptr<const runtime>& prev) const;
  /// What /v1/check, /v1/peek and the admin endpoints check of a request before they act:
  /// POST, application/json, the body (`parse_error`: what parse_check_request found), the
  /// policy, the key, the cost and the duration, against the members `m` the endpoint
  /// takes. Returns the problem to answer, or std::nullopt with `p` the named policy.
  static std::optional<http_response> refuse_request(
      const http_request& req, const runtime& rt, std::string_view endpoint,
      const request_members& m, const check_request& cr,
      const std::optional<check_request_error>& parse_error, const policy*& p);
  /// /v1/check, or with `peek` /v1/peek (the same answer, nothing spent).
  void handle_check(const http_request& req, std::shared_ptr<const runtime> rt,
                    boost::asio::any_io_executor ex, const responder& done, bool peek);
  /// /v1/check's answer to decision `d` (or error `ec`), with its metrics counted under
  /// `endpoint` (`check` or `peek`).
  http_response check_response(std::string_view endpoint, const std::string& policy_name,
                               const policy& p, std::chrono::steady_clock::time_point start,
                               unsigned version, std::error_code ec, const decision& d);

  /// One admin call as its log line tells it.
  struct admin_call {
    std::string_view endpoint;  ///< reset, refund, penalize, block
    std::string peer;
    std::string key;     ///< as the body gave it; empty when it did not
    std::string policy;  ///< likewise
    std::string amount;  ///< "cost 3", "duration_ms 60000" once validated; else empty
  };
  /// /v1/reset, /v1/refund, /v1/penalize and /v1/block (`op`), when the config enables them.
  void handle_admin(const http_request& req, const std::string& peer, std::string_view endpoint,
                    key_operation op, std::shared_ptr<const runtime> rt,
                    boost::asio::any_io_executor ex, const responder& done);
  /// The answer to an operation's result `d` (or error `ec`) and its outcome label.
  static std::pair<http_response, std::string_view> operation_response(
      const std::string& policy_name, const policy& p, unsigned version, std::error_code ec,
      const decision& d);
  /// Logs `call` once, counts it in sluice_admin_requests_total, and returns `res`.
  http_response admin_answer(const admin_call& call, http_response res, std::string_view outcome);

  void handle_auth(const http_request& req, const std::string& peer,
                   std::shared_ptr<const runtime> rt, boost::asio::any_io_executor ex,
                   const responder& done);
  /// The forward-auth answer to evaluation `e`, with its metrics counted (`method` and
  /// `path` are for the shadow rules' debug log).
  http_response auth_response(std::chrono::steady_clock::time_point start, unsigned version,
                              unsigned deny_status, std::string_view method, std::string_view path,
                              http::evaluation e);
  /// POST /json: Envoy's ShouldRateLimit as JSON (the reference service's endpoint).
  void handle_json(const http_request& req, std::shared_ptr<const runtime> rt,
                   boost::asio::any_io_executor ex, const responder& done);
  /// POST /v1/acquire, /v1/release and /v1/renew (`endpoint`): concurrency limits
  /// (slot_endpoints.cpp).
  void handle_slot(const http_request& req, std::string_view endpoint,
                   std::shared_ptr<const runtime> rt, boost::asio::any_io_executor ex,
                   const responder& done);
  /// GET /healthz: the process answers.
  void handle_health(const http_request& req, const responder& done);
  /// GET /metrics: Prometheus text.
  void handle_metrics(const http_request& req, const runtime& rt, const responder& done);
  /// GET /readyz: a probe of every connection of the backend.
  void handle_ready(const http_request& req, std::shared_ptr<const runtime> rt,
                    boost::asio::any_io_executor ex, const responder& done);

  /// One server thread's copy of the runtime in force, read and replaced by that thread
  /// only (current()): a request then reads no word that another thread writes, except
  /// the generation, which changes once per reload. Aligned so that neighbours share no line.
  struct alignas(64) thread_copy {
    std::uint64_t generation = 0;  ///< of `rt`; 0: none taken yet
    std::shared_ptr<const runtime> rt;
  };
  /// The runtime in force and the server threads' copies of it. Shared with the refreshes
  /// that publish() posts to the server threads, which may run after the service is gone.
  struct published {
    published(std::shared_ptr<const runtime> first, std::size_t threads);
    /// Server thread i's copy, taken again first if a newer runtime was published since.
    /// On that thread only.
    const std::shared_ptr<const runtime>& copy_for(std::size_t i);

    /// The runtime in force, as current() reads it off the server threads.
    std::shared_ptr<const runtime> load() const;

    // Requests on the server threads read their thread_copy and take this mutex only when
    // `generation` says a reload happened. (std::atomic<std::shared_ptr> would be no
    // cheaper: libstdc++ 12's is not lock-free, a load spins on a lock bit in the control
    // block pointer, and TSan reports its relaxed unlock as a data race.)
    mutable std::mutex mu;
    std::shared_ptr<const runtime> current;    // guarded by mu
    std::atomic<std::uint64_t> generation{1};  // raised after each change of `current`
    std::vector<thread_copy> copies;           // copies[i]: workers_[i]'s
  };
  /// Makes `next` the runtime in force (apply_mu_ held), and has every server thread take
  /// it soon, so that an idle thread does not hold the previous one (and its backend).
  void publish(std::shared_ptr<const runtime> next);

  const std::vector<boost::asio::io_context*> workers_;  // before published_: build() uses it
  const std::shared_ptr<const clock> time_source_;       // likewise
  std::mutex apply_mu_;  // one apply() at a time; never taken by a request
  const std::shared_ptr<published> published_;
  metrics metrics_;
  std::unique_ptr<rls_decider> rls_;  // after metrics_, which it counts in
  log_throttle internal_errors_log_;
};

}  // namespace sluice::daemon
