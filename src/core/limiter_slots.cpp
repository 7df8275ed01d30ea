// The limiter's concurrency limits (sluice/concurrency.hpp): validation, slot ids, the
// failure modes and the counters around backend::async_slot.
#include <sluice/error.hpp>
#include <sluice/limiter.hpp>

#include <algorithm>
#include <array>
#include <stdexcept>

#include "algorithm/slots.hpp"
#include "core/slot_support.hpp"

namespace sluice {
namespace {

using std::chrono::milliseconds;

// What `closed` tells a refused caller to wait: no lease was seen, so a guess, never longer
// than a lease.
milliseconds closed_retry_after(const concurrency_policy& p) {
  return std::min(p.lease_ttl, milliseconds{1000});
}

}  // namespace

std::shared_ptr<detail::slot_counters> limiter::make_slot_counters() {
  return std::make_shared<detail::slot_counters>();
}

slot limiter::make_slot(const std::shared_ptr<detail::slot_counters>& counters,
                        const std::shared_ptr<backend>& primary,
                        const std::shared_ptr<backend>& fallback, std::string_view key,
                        const concurrency_policy& p, const std::array<char, 32>& id,
                        std::error_code bec, const slot_reply& r) {
  slot s;
  s.counters_ = counters;
  s.key_.assign(key);
  s.lease_ttl_ = p.lease_ttl;
  s.limit_ = p.limit;
  auto take = [&](const std::shared_ptr<backend>& from, const slot_reply& reply) {
    s.in_flight_ = reply.in_flight;
    if (reply.held) {
      s.held_ = true;
      s.on_ = from;
      s.id_ = id;
      s.id_size_ = static_cast<std::uint8_t>(id.size());
      s.expires_in_ = reply.expires_in;
      detail::slot_counters::add(counters->acquired);
    } else {
      s.retry_after_ = reply.retry_after;
      detail::slot_counters::add(counters->refused);
    }
  };
  if (!bec) {
    counters->log.success();
    take(primary, r);
    return s;
  }
  counters->failed(bec);
  s.degraded_ = true;
  s.backend_error_ = bec;
  switch (p.on_failure) {
    case failure_mode::open:
      detail::slot_counters::add(counters->degraded_open);
      s.held_ = true;  // by no backend: no id, nothing to release
      detail::slot_counters::add(counters->acquired);
      break;
    case failure_mode::closed:
      detail::slot_counters::add(counters->degraded_closed);
      s.retry_after_ = closed_retry_after(p);
      detail::slot_counters::add(counters->refused);
      break;
    case failure_mode::local: {
      detail::slot_counters::add(counters->degraded_local);
      slot_reply lr;
      const slot_request again{slot_operation::acquire, std::string_view(id.data(), id.size()),
                               p.limit, p.lease_ttl};
      // The fallback is the in-process memory backend: it answers inline.
      if (detail::slot_step_blocking(*fallback, s.key_, again, lr)) {
        // It cannot fail; if it ever did, refuse rather than admit without a limit.
        s.retry_after_ = closed_retry_after(p);
        detail::slot_counters::add(counters->refused);
      } else {
        take(fallback, lr);
      }
      break;
    }
  }
  return s;
}

void limiter::start_acquire(std::string_view key, const concurrency_policy& p,
                            acquire_handler done) const {
  if (auto ec = validate(key, p)) {
    detail::slot_counters::add(slots_->invalid);
    done(ec, slot{});
    return;
  }
  // Kept as 32 chars, not a std::string: the completion copies it without an allocation.
  std::array<char, 32> id;
  detail::new_slot_id(id);
  const slot_request request{slot_operation::acquire, std::string_view(id.data(), id.size()),
                             p.limit, p.lease_ttl};
  const auto& primary = slot_backend(false);
  primary->async_slot(
      key, request,
      [counters = slots_, primary, fallback = slot_backend(true), k = std::string(key), p, id,
       done = std::move(done)](std::error_code bec, slot_reply r) {
        done({}, make_slot(counters, primary, fallback, k, p, id, bec, r));
      });
}

slot limiter::try_acquire(std::string_view key, const concurrency_policy& p, std::error_code& ec) {
  ec.clear();
  if (auto e = validate(key, p)) {
    detail::slot_counters::add(slots_->invalid);
    ec = e;
    return slot{};
  }
  std::array<char, 32> id;
  detail::new_slot_id(id);
  const slot_request request{slot_operation::acquire, std::string_view(id.data(), id.size()),
                             p.limit, p.lease_ttl};
  const auto& primary = slot_backend(false);
  std::error_code bec;
  slot_reply r;
  // A backend that answers in place (the memory backend) needs no completion and no wait;
  // on another the step is started and waited for.
  if (!primary->slot_now(key, request, bec, r)) {
    bec = detail::slot_step_blocking(*primary, key, request, r);
  }
  return make_slot(slots_, primary, slot_backend(true), key, p, id, bec, r);
}

slot limiter::try_acquire(std::string_view key, const concurrency_policy& p) {
  std::error_code ec;
  auto s = try_acquire(key, p, ec);
  if (ec) throw std::system_error(ec);
  return s;
}

void limiter::async_slot_step(on_backend_thread_t, std::string_view key,
                              const concurrency_policy& p, slot_operation op, std::string_view id,
                              slot_handler done) {
  auto counters = slots_;
  std::error_code ec = validate(key, p);
  if (!ec && op == slot_operation::acquire) ec = errc::unsupported_operation;
  if (!ec && !detail::parse_slot_id(id)) ec = errc::invalid_slot_id;
  if (ec) {
    detail::slot_counters::add(counters->invalid);
    done(ec, slot_reply{});
    return;
  }
  const slot_request request{op, id, p.limit, p.lease_ttl};
  auto primary = slot_backend(false);
  primary->async_slot(
      key, request,
      [counters = std::move(counters), fallback = slot_backend(true), k = std::string(key), p, op,
       i = std::string(id), done = std::move(done)](std::error_code bec, slot_reply r) {
        if (bec) {
          counters->failed(bec);
        } else {
          counters->log.success();
        }
        // With `local`, the slot may be one the fallback gave while the backend failed.
        if (p.on_failure == failure_mode::local && (bec || !r.held)) {
          slot_reply lr;
          const slot_request again{op, i, p.limit, p.lease_ttl};
          if (!detail::slot_step_blocking(*fallback, k, again, lr) && (bec || lr.held)) {
            if (bec) detail::slot_counters::add(counters->degraded_local);
            bec = {};
            r = lr;
          }
        }
        if (op == slot_operation::release && !bec && r.held) {
          detail::slot_counters::add(counters->released);
          counters->waitlist.released(k);
        }
        if (op == slot_operation::renew) {
          detail::slot_counters::add(!bec && r.held ? counters->renewed : counters->renew_failures);
        }
        done(bec, r);
      });
}

slot_reply limiter::slot_step(std::string_view key, const concurrency_policy& p, slot_operation op,
                              std::string_view id, std::error_code& ec) {
  slot_reply r;
  ec = detail::await_slot_reply(
      [&](slot_handler h) { async_slot_step(on_backend_thread, key, p, op, id, std::move(h)); }, r);
  return r;
}

sluice::slot_stats limiter::slot_stats() const noexcept {
  const auto& c = *slots_;
  constexpr auto r = std::memory_order_relaxed;
  return {c.acquired.load(r),      c.refused.load(r),         c.released.load(r),
          c.renewed.load(r),       c.renew_failures.load(r),  c.invalid.load(r),
          c.degraded_open.load(r), c.degraded_closed.load(r), c.degraded_local.load(r),
          c.backend_errors.load(r)};
}

}  // namespace sluice
