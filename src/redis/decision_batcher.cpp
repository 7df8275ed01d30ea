#include "redis/decision_batcher.hpp"

#include <sluice/error.hpp>

#include <limits>
#include <utility>

#include <boost/asio/post.hpp>

#include "redis/batch_selection.hpp"
#include "redis/cluster/key_slot.hpp"
#include "redis/decide_command.hpp"
#include "redis/engine/script_exec.hpp"
#include "redis/reply_action.hpp"

namespace sluice::redis {
namespace asio = boost::asio;

namespace {

// A batch of one is a plain pipelined call: then nothing needs to wait for a free slot.
batcher_options without_batching_unbounded(batcher_options o) {
  if (o.max_batch <= 1) {
    o.max_batch = 1;
    o.max_batches_in_flight = std::numeric_limits<std::size_t>::max();
  }
  return o;
}

}  // namespace

decision_batcher::decision_batcher(asio::io_context& io, std::shared_ptr<connection> conn,
                                   batcher_options options)
    : io_(io), conn_(std::move(conn)), options_(without_batching_unbounded(options)) {}

void decision_batcher::submit(std::string full_key, const detail::limit_params& params,
                              std::uint64_t limit, decide_handler handler) {
  const std::uint16_t slot = options_.by_slot ? cluster::key_slot(full_key) : 0;
  admit({std::move(full_key), params, limit, clock::now() + options_.command_timeout,
         std::move(handler), slot, nullptr, 1, nullptr});
}

void decision_batcher::submit_slot(std::string full_key, const slot_request& request,
                                   slot_handler handler) {
  const std::uint16_t slot = options_.by_slot ? cluster::key_slot(full_key) : 0;
  pending p{};
  p.full_key = std::move(full_key);
  p.deadline = clock::now() + options_.command_timeout;
  p.slot = slot;
  p.step = std::make_shared<slot_step>(slot_step{request.op, std::string(request.id), request.limit,
                                                 request.lease_ttl, std::move(handler)});
  admit(std::move(p));
}

void decision_batcher::admit(pending p) {
  // The connection's circuit breaker, before anything waits here.
  switch (conn_->current_state()) {
    case connection::state::down:
      answer(p, make_error_code(errc::backend_unavailable));
      return;
    case connection::state::stopped:
      answer(p, make_error_code(errc::backend_shutting_down));
      return;
    default:
      break;
  }
  // Counted from here to completion, waiting or sent: the bound a caller sees is on
  // requests, whatever batches they travel in.
  if (accepted_.fetch_add(1, std::memory_order_relaxed) >= options_.max_accepted) {
    accepted_.fetch_sub(1, std::memory_order_relaxed);
    answer(p, make_error_code(errc::backend_overloaded));
    return;
  }
  std::unique_lock lock(mu_);
  if (stopped_) {
    lock.unlock();
    finish(p, make_error_code(errc::backend_shutting_down));
    return;
  }
  const bool opaque = p.call != nullptr;
  waiting_.push_back(std::move(p));
  // While every batch slot is taken, the batch that completes next takes the waiting
  // decisions. An opaque call takes no slot: it may leave as soon as it is first in line.
  const bool post = (opaque || in_flight_ < options_.max_batches_in_flight) &&
                    !std::exchange(flush_posted_, true);
  lock.unlock();
  if (post) asio::post(io_, [self = shared_from_this()] { self->flush(); });
}

void decision_batcher::stop() {
  asio::post(io_, [self = shared_from_this()] {
    std::deque<pending> left;
    {
      std::lock_guard lock(self->mu_);
      self->stopped_ = true;
      left.swap(self->waiting_);
    }
    for (auto& p : left) self->finish(p, make_error_code(errc::backend_shutting_down));
  });
}

void decision_batcher::flush() {
  for (;;) {
    batch b;
    {
      std::lock_guard lock(mu_);
      flush_posted_ = false;
      if (waiting_.empty()) return;
      if (!waiting_.front().call) {
        if (in_flight_ >= options_.max_batches_in_flight) return;
        ++in_flight_;
      }
      b = take_batch();
    }
    send(std::move(b));
  }
}

decision_batcher::batch decision_batcher::take_batch() {
  return redis::take_batch(
      waiting_, options_.max_batch, options_.by_slot,
      [](const pending& p) { return p.call != nullptr; }, [](const pending& p) { return p.slot; },
      [](const pending& p) { return p.step != nullptr; });
}

bool decision_batcher::reroutes(const reply_ptr& reply, bool slots) const {
  if (!(slots ? static_cast<bool>(options_.reroute_slot) : static_cast<bool>(options_.reroute)))
    return false;
  switch (classify_reply(*reply).what) {
    case reply_action::kind::moved:
    case reply_action::kind::ask:
    case reply_action::kind::retry_later:
    case reply_action::kind::rediscover_master:
      return true;
    default:
      return false;
  }
}

void decision_batcher::reroute(pending& p, const reply_ptr& reply) {
  accepted_.fetch_sub(1, std::memory_order_relaxed);
  if (p.step) {
    const slot_request r{p.step->op, p.step->id, p.step->limit, p.step->lease_ttl};
    options_.reroute_slot(std::move(p.full_key), r, p.deadline, std::move(p.step->handler), reply);
    return;
  }
  options_.reroute(std::move(p.full_key), p.params, p.limit, p.deadline, std::move(p.handler),
                   reply);
}

void decision_batcher::send(batch b) {
  if (b.front().call) return send_opaque(std::move(b.front()));
  // A decision whose deadline passed while it waited is not worth Redis's time.
  const auto now = clock::now();
  std::size_t kept = 0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    if (b[i].deadline <= now) {
      finish(b[i], make_error_code(errc::backend_timeout));
    } else {
      if (kept != i) b[kept] = std::move(b[i]);
      ++kept;
    }
  }
  b.resize(kept);
  if (b.empty()) {
    batch_done();
  } else if (b.front().step) {
    send_slots(std::make_shared<batch>(std::move(b)));
  } else if (b.size() == 1) {
    send_single(std::move(b.front()));
  } else {
    send_batch(std::make_shared<batch>(std::move(b)));
  }
}

void decision_batcher::batch_done() {
  bool more = false;
  {
    std::lock_guard lock(mu_);
    --in_flight_;
    more = !waiting_.empty() && !std::exchange(flush_posted_, true);
  }
  // Posted, not run inline: batch_done may run inside the connection's handler, and the
  // connection takes what this submits on its next flush either way.
  if (more) asio::post(io_, [self = shared_from_this()] { self->flush(); });
}

// send_single and send_batch run on the I/O thread (from flush, or from a completion), so
// they hand their call to the connection's write queue directly: a decision is queued here
// once, and its one deadline, taken at submission, travels with every call made for it
// (the NOSCRIPT re-send included: script_exec.hpp).
struct decision_batcher::single_call {
  std::shared_ptr<decision_batcher> self;
  pending p;
  void append(std::string& out, script_call how) const {
    out.reserve(80 + p.full_key.size());
    append_decide_command(out, how, p.full_key, p.params);
  }
  void operator()(std::error_code ec, const reply_ptr& reply) {
    self->batch_done();
    if (!ec && self->reroutes(reply, false)) return self->reroute(p, reply);
    decision d;
    if (!ec) ec = to_decision(*reply, p.limit, d);
    self->finish(p, ec, d);
  }
};

struct decision_batcher::batch_call {
  std::shared_ptr<decision_batcher> self;
  std::shared_ptr<batch> b;
  void append(std::string& out, script_call how) const { append_batch_command(out, how, *b); }
  void operator()(std::error_code ec, const reply_ptr& reply) {
    self->batch_done();
    if (!ec && self->reroutes(reply, false)) {
      for (auto& p : *b) self->reroute(p, reply);
      return;
    }
    self->complete(*b, ec, reply);
  }
};

// Slot steps, one or several, in one call of lua/slots.lua.
struct decision_batcher::slots_call {
  std::shared_ptr<decision_batcher> self;
  std::shared_ptr<batch> b;
  void append(std::string& out, script_call how) const {
    std::vector<slot_step_args> steps;
    steps.reserve(b->size());
    std::size_t bytes = 0;
    for (const auto& p : *b) {
      steps.push_back({p.full_key, p.step->op, p.step->id, p.step->limit, p.step->lease_ttl});
      bytes += p.full_key.size();
    }
    out.reserve(out.size() + 80 + bytes + 64 * b->size());
    append_slot_command(out, how, steps);
  }
  void operator()(std::error_code ec, const reply_ptr& reply) {
    self->batch_done();
    if (!ec && self->reroutes(reply, true)) {
      for (auto& p : *b) self->reroute(p, reply);
      return;
    }
    self->complete_slots(*b, ec, reply);
  }
};

// An opaque call completes as its caller says; the queue only gives back its bound (it took
// no batch slot).
struct decision_batcher::opaque_call {
  std::shared_ptr<decision_batcher> self;
  std::shared_ptr<queued_call> call;
  void append(std::string& out, script_call how) const { call->append(out, how); }
  void operator()(std::error_code ec, reply_ptr reply) {
    self->accepted_.fetch_sub(1, std::memory_order_relaxed);
    call->done(ec, std::move(reply));
  }
};

void decision_batcher::send_opaque(pending p) {
  // Past its deadline while it waited: not worth Redis's time either.
  if (p.deadline <= clock::now()) return finish(p, make_error_code(errc::backend_timeout));
  other_calls_.fetch_add(1, std::memory_order_relaxed);
  const script_exec how{.deadline = p.deadline, .replies = p.replies, .noscript = &noscript_};
  exec_script(conn_, how, opaque_call{shared_from_this(), std::move(p.call)});
}

void decision_batcher::send_slots(std::shared_ptr<batch> b) {
  other_calls_.fetch_add(1, std::memory_order_relaxed);
  slot_steps_.fetch_add(b->size(), std::memory_order_relaxed);
  // FIFO: the first step waited longest, so its deadline is the call's.
  const script_exec how{.deadline = b->front().deadline, .noscript = &noscript_};
  exec_script(conn_, how, slots_call{shared_from_this(), std::move(b)});
}

void decision_batcher::send_single(pending p) {
  count_call(1);
  const script_exec how{.deadline = p.deadline, .noscript = &noscript_};
  exec_script(conn_, how, single_call{shared_from_this(), std::move(p)});
}

void decision_batcher::send_batch(std::shared_ptr<batch> b) {
  count_call(b->size());
  // FIFO: the first decision waited longest, so its deadline is the batch's.
  const script_exec how{.deadline = b->front().deadline, .noscript = &noscript_};
  exec_script(conn_, how, batch_call{shared_from_this(), std::move(b)});
}

void decision_batcher::append_batch_command(std::string& out, script_call call, const batch& b) {
  std::vector<multi_key> keys;
  keys.reserve(b.size());
  for (const auto& p : b) keys.push_back({p.full_key, p.params});
  append_decide_batch_command(out, call, keys);
}

void decision_batcher::complete(batch& b, std::error_code ec, const reply_ptr& reply) {
  std::vector<batch_item> items;
  if (!ec) ec = to_error(parse_decide_batch_reply(*reply, b.size(), items));
  for (std::size_t i = 0; i < b.size(); ++i) {
    if (ec || items[i].ec) {
      finish(b[i], ec ? ec : items[i].ec);
    } else {
      finish(b[i], {}, detail::to_decision(items[i].outcome, b[i].limit));
    }
  }
}

void decision_batcher::complete_slots(batch& b, std::error_code ec, const reply_ptr& reply) {
  std::vector<slot_result> results;
  if (!ec) ec = to_slot_replies(*reply, b.size(), results);
  for (std::size_t i = 0; i < b.size(); ++i) {
    const std::error_code e = ec ? ec : results[i].ec;
    accepted_.fetch_sub(1, std::memory_order_relaxed);
    if (e) {
      answer(b[i], e);
    } else {
      b[i].step->handler({}, results[i].reply);
    }
  }
}

void decision_batcher::finish(pending& p, std::error_code ec, decision d) {
  accepted_.fetch_sub(1, std::memory_order_relaxed);
  answer(p, ec, d);
}

void decision_batcher::answer(pending& p, std::error_code ec, decision d) const {
  // An opaque call's caller sees its own errors (a Cluster client refreshes its map then).
  if (p.call) return p.call->done(ec, nullptr);
  if (p.step) {
    // A step's errors count as a decision's (a Cluster client looks at its map again).
    if (options_.on_failure && ec && ec != errc::backend_shutting_down) options_.on_failure(ec);
    return p.step->handler(ec, {});
  }
  if (ec) return fail(p.handler, ec);
  p.handler(ec, d);
}

void decision_batcher::fail(const decide_handler& handler, std::error_code ec) const {
  if (options_.on_failure && ec != errc::backend_shutting_down) options_.on_failure(ec);
  handler(ec, {});
}

}  // namespace sluice::redis
