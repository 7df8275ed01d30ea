// /healthz (the process answers), /readyz (a round trip through every backend connection)
// and /metrics (Prometheus text).
#include "service.hpp"

#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "complete_on.hpp"
#include "http_responses.hpp"

namespace sluice::daemon {
namespace {

// The readiness probe's policy: a bucket that is always full again within a millisecond,
// so probing never limits anything and its key expires at once.
policy probe_policy() {
  policy p;
  p.capacity = max_capacity;
  p.refill_per_second = max_refill_per_second;
  p.on_failure = failure_mode::closed;
  return p;
}

}  // namespace

void service::handle_health(const http_request& req, const responder& done) {
  done(plain(200, "{\"status\":\"ok\"}\n", "application/json", req.version()));
}

void service::handle_metrics(const http_request& req, const runtime& rt, const responder& done) {
  metrics_.backend_counters(rt.backend_stats());
  metrics_.limiter_counters(rt.limiter_stats());
  metrics_.lease_counters(rt.lease_stats_by_policy());
  done(plain(200, metrics_.serialize(), "text/plain; version=0.0.4; charset=utf-8", req.version()));
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
