// sluice::slot and concurrency_policy's validation (sluice/concurrency.hpp).
#include <sluice/concurrency.hpp>
#include <sluice/error.hpp>

#include <utility>

#include "core/slot_support.hpp"

namespace sluice {
namespace {

// A release's error. A backend going away drops what is queued: not trouble worth a log line.
void count_release_error(const std::shared_ptr<detail::slot_counters>& c, std::error_code ec) {
  if (ec && ec != errc::backend_shutting_down && c) c->failed(ec);
}

}  // namespace

std::error_code validate(const concurrency_policy& p) noexcept {
  if (p.limit < 1 || p.limit > max_concurrency_limit) return errc::invalid_limit;
  if (p.lease_ttl.count() < 1 || p.lease_ttl > max_lease_ttl) return errc::invalid_lease_ttl;
  return {};
}

std::error_code validate(std::string_view key, const concurrency_policy& p) noexcept {
  if (auto ec = validate(p)) return ec;
  if (key.empty()) return errc::empty_key;
  if (key.size() > max_key_size) return errc::key_too_long;
  return {};
}

slot::slot(slot&& other) noexcept
    : counters_(std::move(other.counters_)),
      on_(std::move(other.on_)),
      key_(std::move(other.key_)),
      id_(other.id_),
      id_size_(other.id_size_),
      lease_ttl_(other.lease_ttl_),
      held_(other.held_),
      degraded_(other.degraded_),
      backend_error_(other.backend_error_),
      in_flight_(other.in_flight_),
      limit_(other.limit_),
      retry_after_(other.retry_after_),
      expires_in_(other.expires_in_) {
  other.clear();
}

slot& slot::operator=(slot&& other) noexcept {
  if (this != &other) {
    release();
    counters_ = std::move(other.counters_);
    on_ = std::move(other.on_);
    key_ = std::move(other.key_);
    id_ = other.id_;
    id_size_ = other.id_size_;
    lease_ttl_ = other.lease_ttl_;
    held_ = other.held_;
    degraded_ = other.degraded_;
    backend_error_ = other.backend_error_;
    in_flight_ = other.in_flight_;
    limit_ = other.limit_;
    retry_after_ = other.retry_after_;
    expires_in_ = other.expires_in_;
    other.clear();
  }
  return *this;
}

slot::~slot() { release(); }

void slot::clear() noexcept {
  held_ = false;
  on_.reset();
  id_size_ = 0;
  expires_in_ = std::chrono::milliseconds{0};
}

void slot::release() noexcept {
  // Not waited for: the answer only says whether it was still held.
  start_release({});
}

void slot::start_release(std::function<void(std::error_code)> done) noexcept {
  if (!held_) {
    if (done) done({});
    return;
  }
  if (counters_) detail::slot_counters::add(counters_->released);
  if (!on_) {
    clear();
    if (done) done({});
    return;
  }
  try {
    const slot_request r{slot_operation::release, id(), 0, std::chrono::milliseconds{0}};
    std::error_code ec;
    slot_reply reply;
    if (on_->slot_now(key_, r, ec, reply)) {
      // Answered in place (the memory backend): no completion to type-erase.
      count_release_error(counters_, ec);
      if (done) done(ec);
    } else if (done) {
      on_->async_slot(key_, r,
                      [c = counters_, done = std::move(done)](std::error_code ec, slot_reply) {
                        count_release_error(c, ec);
                        done(ec);
                      });
    } else {
      // release(): one shared_ptr captured, so the handler fits std::function's own storage
      // (no allocation per release).
      on_->async_slot(
          key_, r, [c = counters_](std::error_code ec, slot_reply) { count_release_error(c, ec); });
    }
  } catch (...) {
    // No memory to send it: the lease ends by itself. `done` went with the attempt.
  }
  // Sent before this wake-up: a woken waiter's acquire reaches the backend after it.
  if (counters_) counters_->waitlist.released(key_);
  clear();
}

void slot::start_renew(std::function<void(std::error_code, slot_reply)> done) {
  if (!held_ || !on_) {
    // Not held: nothing to keep. Degraded `open`: no backend holds it, nothing can take it.
    slot_reply r;
    r.held = held_;
    r.in_flight = in_flight_;
    r.expires_in = expires_in_;
    done({}, r);
    return;
  }
  on_->async_slot(key_, slot_request{slot_operation::renew, id(), limit_, lease_ttl_},
                  std::move(done));
}

bool slot::finish_renew(std::error_code bec, const slot_reply& r, std::error_code& ec) noexcept {
  ec.clear();
  if (!held_) return false;
  if (!on_) return true;
  if (bec) {
    ec = bec;
    if (counters_) {
      detail::slot_counters::add(counters_->renew_failures);
      counters_->failed(bec);
    }
    return false;
  }
  if (counters_) counters_->log.success();
  in_flight_ = r.in_flight;
  if (!r.held) {
    // Its lease had ended: whoever holds a slot of this key now is not this holder.
    if (counters_) detail::slot_counters::add(counters_->renew_failures);
    clear();
    return false;
  }
  if (counters_) detail::slot_counters::add(counters_->renewed);
  expires_in_ = r.expires_in;
  return true;
}

bool slot::renew(std::error_code& ec) {
  // The async step, waited for: the answer is applied here, on the caller's thread.
  slot_reply r;
  const auto bec =
      detail::await_slot_reply([this](slot_handler h) { start_renew(std::move(h)); }, r);
  return finish_renew(bec, r, ec);
}

bool slot::renew() {
  std::error_code ec;
  return renew(ec);
}

std::string slot::detach() {
  std::string out = on_ ? std::string(id()) : std::string();
  clear();
  return out;
}

}  // namespace sluice
