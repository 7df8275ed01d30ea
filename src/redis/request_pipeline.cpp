#include "redis/request_pipeline.hpp"

#include <sluice/error.hpp>

#include <utility>

namespace sluice::redis {

void request_pipeline::complete(request& r, std::error_code ec, reply_ptr reply) {
  if (!r.handler) return;
  auto h = std::exchange(r.handler, nullptr);
  pending_.fetch_sub(1, std::memory_order_relaxed);
  h(ec, std::move(reply));
}

bool request_pipeline::accept(request& r, link_state s, clock::time_point now) {
  if (s == link_state::down) {
    complete(r, make_error_code(errc::backend_unavailable));
  } else if (s == link_state::stopped) {
    complete(r, make_error_code(errc::backend_shutting_down));
  } else if (r.deadline <= now) {
    complete(r, make_error_code(errc::backend_timeout));
  } else {
    unsent_.push_back(std::move(r));
    return true;
  }
  return false;
}

void request_pipeline::take_unsent(std::string& out, clock::time_point now) {
  for (auto& r : unsent_) {
    out += r.command;
    r.command = std::string();  // the bytes now live in out
    r.written = now;
    in_flight_.push_back(std::move(r));
  }
  unsent_.clear();
}

request_pipeline::reply_kind request_pipeline::on_reply(reply_ptr reply) {
  if (handshake_left_ > 0) {
    if (is_error(*reply)) return reply_kind::handshake_refused;
    return --handshake_left_ == 0 ? reply_kind::handshake_done : reply_kind::handshake;
  }
  if (in_flight_.empty()) return reply_kind::unexpected;
  if (in_flight_.front().replies > 1) {
    --in_flight_.front().replies;  // a leading command of a group (ASKING): not the answer
    return reply_kind::answered;
  }
  request r = std::move(in_flight_.front());
  in_flight_.pop_front();
  complete(r, {}, std::move(reply));  // a request that already timed out has no handler
  return reply_kind::answered;
}

request_pipeline::stuck request_pipeline::expire(clock::time_point now,
                                                 std::optional<clock::time_point> write_started) {
  // Past their deadline: they fail, and written ones stay in line for their replies.
  for (auto& r : in_flight_) {
    if (r.handler && r.deadline <= now) complete(r, make_error_code(errc::backend_timeout));
  }
  for (auto it = unsent_.begin(); it != unsent_.end();) {
    if (it->deadline > now) {
      ++it;
      continue;
    }
    complete(*it, make_error_code(errc::backend_timeout));
    it = unsent_.erase(it);
  }
  // Written a whole timeout ago and not answered: a stopped or overloaded server, a black
  // hole. Reconnecting is the only way to tell.
  if (!in_flight_.empty() && in_flight_.front().written + command_timeout_ <= now)
    return stuck::no_reply;
  if (write_started && *write_started + command_timeout_ <= now) return stuck::write_unfinished;
  return stuck::no;
}

std::optional<request_pipeline::clock::time_point> request_pipeline::next_expiry(
    std::optional<clock::time_point> write_started) const {
  // A scan per call is cheap: the timer fires about once per command timeout, not per request.
  std::optional<clock::time_point> earliest;
  const auto consider = [&](clock::time_point t) {
    if (!earliest || t < *earliest) earliest = t;
  };
  for (const auto& r : in_flight_) {
    if (r.handler) consider(r.deadline);
  }
  for (const auto& r : unsent_) {
    if (r.handler) consider(r.deadline);
  }
  if (!in_flight_.empty()) consider(in_flight_.front().written + command_timeout_);
  if (write_started) consider(*write_started + command_timeout_);
  return earliest;
}

void request_pipeline::fail_all(std::error_code written_ec, std::error_code unsent_ec) {
  handshake_left_ = 0;
  // Handlers may submit again (a NOSCRIPT retry): those land in fresh queues, not in these.
  auto written = std::exchange(in_flight_, {});
  auto unsent = std::exchange(unsent_, {});
  for (auto& r : written) complete(r, written_ec);
  for (auto& r : unsent) complete(r, unsent_ec);
}

void request_pipeline::fail_written(std::error_code ec) {
  handshake_left_ = 0;
  auto written = std::exchange(in_flight_, {});
  for (auto& r : written) complete(r, ec);
}

}  // namespace sluice::redis
