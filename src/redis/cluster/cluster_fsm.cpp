#include "redis/cluster/cluster_fsm.hpp"

#include <sluice/error.hpp>

#include <algorithm>
#include <utility>

#include "redis/reply_action.hpp"

namespace sluice::redis::cluster {

op_step op_fsm::retry(node_address target, bool asking, clock::time_point now) {
  op_step s;
  if (++redirects_ > max_redirects) {
    s.what = op_step::kind::fail;
    s.ec = make_error_code(errc::backend_unavailable);
    return s;
  }
  if (now >= deadline_) {
    s.what = op_step::kind::fail;
    s.ec = make_error_code(errc::backend_timeout);
    return s;
  }
  s.what = op_step::kind::retry;
  s.target = std::move(target);
  s.asking = asking;
  return s;
}

op_step op_fsm::on_reply(std::error_code ec, const redisReply* reply, const node_address& node,
                         clock::time_point now) {
  op_step s;
  if (ec || !reply) {
    // The node is down, stuck or gone: the map may be stale (a failover). This call fails
    // now (the limiter applies the failure mode); later ones use the new map.
    s.what = op_step::kind::fail;
    s.ec = ec ? ec : make_error_code(errc::backend_protocol_error);
    s.refresh = s.ec != errc::backend_shutting_down;
    return s;
  }
  auto action = classify_reply(*reply);
  switch (action.what) {
    case reply_action::kind::moved:
    case reply_action::kind::ask: {
      node_address target = std::move(action.redirect.target);
      if (target.host.empty()) target.host = node.host;  // ":port": the node that answered
      const bool moved = action.what == reply_action::kind::moved;
      s = retry(std::move(target), !moved, now);
      s.moved = moved;
      s.ask = !moved;
      s.refresh = moved || s.refresh;
      return s;
    }
    case reply_action::kind::resend_as_eval:
      // NOSCRIPT even to the source (script_exec.hpp sent it once): a script error.
      s.what = op_step::kind::fail;
      s.ec = make_error_code(errc::backend_script_error);
      return s;
    case reply_action::kind::retry_later:
    case reply_action::kind::rediscover_master:
      // The cluster is reconfiguring (a demoted master says READONLY): not this script's
      // fault, and the map may be stale.
      s.what = op_step::kind::fail;
      s.ec = make_error_code(errc::backend_unavailable);
      s.refresh = true;
      return s;
    case reply_action::kind::done:
    case reply_action::kind::failed:
      break;
  }
  return s;  // decode: the caller's decoder reads a result or reports the script error
}

op_step op_fsm::on_handed_back(const redisReply& reply, const node_address& node,
                               clock::time_point now) {
  if (classify_reply(reply).what == reply_action::kind::retry_later) {
    // A call of several decisions on a slot in migration, with some of their keys moved
    // already, meets TRYAGAIN: alone, each is answered (or sent on with ASK). A lone
    // decision that meets a transient error comes back here the same way, and ends on its
    // second one (on_reply).
    return retry(node, false, now);
  }
  op_step s = on_reply({}, &reply, node, now);
  if (s.what == op_step::kind::decode) {
    // The batcher hands back only replies that send a decision elsewhere.
    s.what = op_step::kind::fail;
    s.ec = make_error_code(errc::backend_protocol_error);
  }
  return s;
}

refresh_fsm::step refresh_fsm::request(clock::time_point now) {
  if (refreshing_) {
    again_ = true;
    return {};
  }
  if (waiting_) return {};  // a round is scheduled already
  const auto earliest = last_ + std::max(refresh_min_interval, backoff_);
  if (ever_ && now < earliest) {
    waiting_ = true;
    return {step::kind::wait, earliest};
  }
  refreshing_ = true;
  ever_ = true;
  last_ = now;
  return {step::kind::start, now};
}

refresh_fsm::step refresh_fsm::on_wakeup(clock::time_point now) {
  waiting_ = false;
  return request(now);
}

refresh_fsm::round_end refresh_fsm::on_round_done(bool ok) {
  refreshing_ = false;
  round_end e;
  if (ok) {
    backoff_ = std::chrono::milliseconds{0};
  } else {
    e.warn = backoff_ == std::chrono::milliseconds{0};
    backoff_ =
        backoff_.count() == 0 ? refresh_min_interval : std::min(backoff_ * 2, refresh_retry_max);
  }
  e.start_again = again_ || !ok;
  again_ = false;
  return e;
}

}  // namespace sluice::redis::cluster
