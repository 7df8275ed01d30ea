#pragma once
// What every Redis topology's backend does the same way, written once: the key prefix, the
// I/O runner (io_runner.hpp), the blocking wait (refused on the I/O thread, where it would
// never end) and the single-key path. A check or a key operation is one decision: the full
// key and the algorithm's parameters go to the topology's submit() (the standalone batcher,
// the Cluster client), which owns the breaker, the in-flight bound and the deadline, and
// sends through the one script call (script_exec.hpp: EVALSHA, and EVAL once on NOSCRIPT).
// So one check reads: limiter -> engine_backend::async_decide -> submit (topology: the
// batcher, or the Cluster client and its node's batcher) -> exec_script -> connection.
//
// `Base` is sluice::backend, or an interface that extends it.
#include <sluice/backend.hpp>
#include <sluice/error.hpp>
#include <sluice/redis_backend.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "algorithm/limit.hpp"
#include "core/await_decision.hpp"
#include "redis/engine/io_runner.hpp"
#include "redis/lease_command.hpp"
#include "redis/script_request.hpp"
#include "redis/slot_command.hpp"

namespace sluice::redis {

template <class Base = backend>
class engine_backend : public Base {
 public:
  std::error_code decide(std::string_view key, const policy& p, std::uint64_t cost,
                         decision& out) final {
    if (on_io_thread()) return make_error_code(errc::backend_unavailable);
    return detail::await_decision(
        [&](decide_handler done) { async_decide(key, p, cost, std::move(done)); }, wait_limit_,
        out);
  }

  // The decision path carries the step (every decision script takes any).
  std::error_code operate(std::string_view key, const policy& p, key_operation op,
                          std::uint64_t amount, decision& out) final {
    if (on_io_thread()) return make_error_code(errc::backend_unavailable);
    return detail::await_decision(
        [&](decide_handler done) { async_operate(key, p, op, amount, std::move(done)); },
        wait_limit_, out);
  }

  void async_decide(std::string_view key, const policy& p, std::uint64_t cost,
                    decide_handler handler) final {
    submit(full_key(key), detail::to_limit_params(p, cost), limit_of(p), std::move(handler));
  }

  void async_operate(std::string_view key, const policy& p, key_operation op, std::uint64_t amount,
                     decide_handler handler) final {
    submit(full_key(key), detail::to_limit_params(p, op, amount), limit_of(p), std::move(handler));
  }

  // Leases: one script call each, through the topology's submit_script().
  void async_lease(std::string_view key, const policy& p, const lease_request& request,
                   lease_handler handler) final {
    submit_script(lease_script(full_key(key), p, request),
                  [p, handler = std::move(handler)](std::error_code ec, reply_ptr reply) {
                    lease_grant g;
                    if (!ec) ec = to_lease_grant(*reply, p, g);
                    handler(ec, ec ? lease_grant{} : g);
                  });
  }

  void async_lease_return(std::string_view key, const policy& p, std::uint64_t units,
                          std::int64_t granted_at_ms, decide_handler handler) final {
    submit_script(lease_return_script(full_key(key), p, units, granted_at_ms),
                  [p, handler = std::move(handler)](std::error_code ec, reply_ptr reply) {
                    decision d;
                    if (!ec) ec = to_return_decision(*reply, p, d);
                    handler(ec, ec ? decision{} : d);
                  });
  }

  // Slot steps: the topology's submit_slot(), which batches the steps waiting together.
  void async_slot(std::string_view key, const slot_request& request, slot_handler handler) final {
    submit_slot(full_key(key), request, std::move(handler));
  }

 protected:
  engine_backend(const redis_options& o, std::shared_ptr<io_runner> runner)
      : prefix_(o.key_prefix),
        wait_limit_(blocking_wait_limit(o.command_timeout)),
        runner_(std::move(runner)) {}

  /// The topology's queue: decides `params` on `full_key`; `handler` runs exactly once, on
  /// the I/O thread or inline when refused at once. Thread-safe.
  virtual void submit(std::string full_key, const detail::limit_params& params, std::uint64_t limit,
                      decide_handler handler) = 0;

  /// The topology's queue for any other script call (script_request.hpp): `handler` runs
  /// exactly once, on the I/O thread or inline when refused at once. Thread-safe.
  virtual void submit_script(script_request request, reply_handler handler) = 0;

  /// The topology's queue for a slot step (lua/slots.lua; `request` validated, its id
  /// borrowed for the call): `handler` runs exactly once, on the I/O thread or inline when
  /// refused at once. Thread-safe. By default, one script call per step (submit_script).
  virtual void submit_slot(std::string full_key, const slot_request& request,
                           slot_handler handler) {
    submit_script(slot_script(std::move(full_key), request),
                  [handler = std::move(handler)](std::error_code ec, reply_ptr reply) {
                    slot_reply r;
                    if (!ec) ec = to_slot_reply(*reply, r);
                    handler(ec, ec ? slot_reply{} : r);
                  });
  }

  std::string full_key(std::string_view key) const {
    std::string k;
    k.reserve(prefix_.size() + key.size());
    k.append(prefix_).append(key);
    return k;
  }
  bool on_io_thread() const { return runner_->on_io_thread(); }
  io_runner& runner() const noexcept { return *runner_; }
  std::chrono::nanoseconds wait_limit() const noexcept { return wait_limit_; }

 private:
  const std::string prefix_;
  const std::chrono::nanoseconds wait_limit_;
  const std::shared_ptr<io_runner> runner_;
};

}  // namespace sluice::redis
