#include "redis/cluster/cluster_client.hpp"

#include <sluice/error.hpp>

#include <algorithm>
#include <utility>

#include <boost/asio/post.hpp>

#include "core/log.hpp"
#include "redis/cluster/key_slot.hpp"
#include "redis/engine/script_exec.hpp"
#include "redis/reply_action.hpp"
#include "redis/slot_command.hpp"

namespace sluice::redis::cluster {
namespace asio = boost::asio;

struct cluster_client::op {
  std::string key;  // routes the call (for a multi-key call: its first key)
  detail::limit_params params;
  std::uint64_t limit = 0;
  decide_handler handler;
  // A multi-key call (all keys in one slot) instead of a single decision.
  struct multi_call {
    multi_kind kind = multi_kind::decide;
    std::vector<std::string> keys;
    std::vector<detail::limit_params> params;
    std::vector<std::uint64_t> capacities;
    decide_all_handler handler;
  };
  std::unique_ptr<multi_call> multi;
  // Any other script call (a lease, a slot step): its reply goes back undecoded.
  struct other_call {
    std::shared_ptr<const script_request> request;
    reply_handler handler;
  };
  std::unique_ptr<other_call> other;
  op_fsm fsm;  // its deadline and redirections
  std::atomic<bool> done{false};
  explicit op(clock::time_point deadline) : fsm(deadline) {}
};

// One attempt of an op on one node, for script_exec.hpp (which re-sends it as EVAL on
// NOSCRIPT, under the same ASKING). Every attempt carries the op's deadline, so the
// connections bound the whole decision and no timer of its own is needed.
struct cluster_client::attempt {
  std::shared_ptr<cluster_client> self;
  std::shared_ptr<op> o;
  node_address node;
  bool asking = false;

  void append(std::string& out, script_call how) const {
    out.reserve(96 + o->key.size());
    if (asking) append_command(out, {"ASKING"});
    if (o->other) {
      o->other->request->append(out, how);
      return;
    }
    if (!o->multi) {
      append_decide_command(out, how, o->key, o->params);
      return;
    }
    std::vector<multi_key> keys;
    keys.reserve(o->multi->keys.size());
    for (std::size_t i = 0; i < o->multi->keys.size(); ++i) {
      keys.push_back({o->multi->keys[i], o->multi->params[i]});
    }
    if (o->multi->kind == multi_kind::decide) {
      append_decide_multi_command(out, how, keys);
    } else {
      append_refund_command(out, how, keys);
    }
  }
  void operator()(std::error_code ec, reply_ptr reply) {
    self->on_reply(o, node, ec, std::move(reply));
  }
};

cluster_client::cluster_client(asio::io_context& io, const redis_options& options,
                               const redis_cluster_url& url, tls_config tls)
    : io_(io),
      options_(options),
      url_(url),
      tls_(std::move(tls)),
      // A cluster has no databases: AUTH and the scripts, on every node.
      handshake_(make_handshake({.user = url_.user, .password = url_.password})),
      refresh_timer_(io) {}

void cluster_client::start() {
  for (const auto& s : url_.seeds) link_for({s.host, s.port});
  request_refresh();
}

void cluster_client::stop() {
  std::map<node_address, node_link> nodes;
  {
    std::lock_guard lock(mu_);
    if (stopped_) return;
    stopped_ = true;
    nodes.swap(nodes_);
    routing_.reset();
  }
  for (auto& [addr, link] : nodes) {
    link.batcher->stop();
    link.conn->stop();
  }
  asio::post(io_, [self = shared_from_this()] { self->refresh_timer_.cancel(); });
}

cluster_stats cluster_client::stats() const {
  cluster_stats s;
  s.moved = moved_.load(std::memory_order_relaxed);
  s.ask = ask_.load(std::memory_order_relaxed);
  s.refreshes = refreshes_.load(std::memory_order_relaxed);
  s.refresh_failures = refresh_failures_.load(std::memory_order_relaxed);
  s.cross_slot = cross_slot_.load(std::memory_order_relaxed);
  s.refunds = refunds_.load(std::memory_order_relaxed);
  s.refund_failures = refund_failures_.load(std::memory_order_relaxed);
  std::lock_guard lock(mu_);
  for (const auto& [addr, link] : nodes_) {
    const auto sent = link.batcher->sent();
    s.script_calls += sent.calls;
    s.batched_decisions += sent.decisions;
    s.noscript += sent.noscript;
    s.other_script_calls += sent.other_calls;
  }
  return s;
}

cluster_client::node_link cluster_client::link_for(const node_address& node) {
  std::lock_guard lock(mu_);
  if (stopped_) return {};
  auto& link = nodes_[node];
  if (!link.conn) {
    connection_config c;
    c.host = node.host;
    c.port = node.port;
    c.handshake = handshake_;
    c.connect_timeout = options_.connect_timeout;
    c.command_timeout = options_.command_timeout;
    c.backoff_min = options_.reconnect_backoff_min;
    c.backoff_max = options_.reconnect_backoff_max;
    c.name = "sluice cluster " + node.to_string();
    c.tls = tls_;
    link.conn = std::make_shared<connection>(io_, std::move(c));
    batcher_options b{.max_batch = options_.max_batch,
                      .max_accepted = options_.max_in_flight,
                      .command_timeout = options_.command_timeout,
                      .by_slot = true};
    b.reroute = [weak = weak_from_this(), node](
                    std::string full_key, const detail::limit_params& params, std::uint64_t limit,
                    clock::time_point deadline, decide_handler handler, const reply_ptr& reply) {
      if (auto self = weak.lock()) {
        self->follow(node, std::move(full_key), params, limit, deadline, std::move(handler), reply);
      } else {
        handler(make_error_code(errc::backend_shutting_down), {});
      }
    };
    b.reroute_slot = [weak = weak_from_this(), node](
                         std::string full_key, const slot_request& request,
                         clock::time_point deadline, slot_handler handler, const reply_ptr& reply) {
      if (auto self = weak.lock()) {
        self->follow_slot(node, std::move(full_key), request, deadline, std::move(handler), reply);
      } else {
        handler(make_error_code(errc::backend_shutting_down), {});
      }
    };
    // The node down, stuck or gone: the map may be stale (a failover).
    b.on_failure = [weak = weak_from_this()](std::error_code) {
      if (auto self = weak.lock()) self->request_refresh();
    };
    link.batcher = std::make_shared<decision_batcher>(io_, link.conn, std::move(b));
    link.conn->start();
  }
  return link;
}

std::shared_ptr<decision_batcher> cluster_client::owner_of(std::string_view full_key) const {
  std::shared_ptr<const routing> r;
  {
    std::lock_guard lock(mu_);
    r = routing_;
  }
  const slot_range* range = r && r->map ? r->map->range_of(key_slot(full_key)) : nullptr;
  if (!range) return nullptr;
  return r->owners[static_cast<std::size_t>(range - r->map->ranges().data())].batcher;
}

void cluster_client::submit(std::string full_key, const detail::limit_params& params,
                            std::uint64_t limit, decide_handler handler) {
  if (auto owner = owner_of(full_key)) {
    // The owner's batcher (whose on_failure looks at the map again).
    owner->submit(std::move(full_key), params, limit, std::move(handler));
    return;
  }
  // No map yet, or no master for the slot: route() asks a seed, or fails and looks again.
  auto o = std::make_shared<op>(clock::now() + options_.command_timeout);
  o->key = std::move(full_key);
  o->params = params;
  o->limit = limit;
  o->handler = std::move(handler);
  route(o);
}

void cluster_client::follow(const node_address& node, std::string full_key,
                            const detail::limit_params& params, std::uint64_t limit,
                            clock::time_point deadline, decide_handler handler,
                            const reply_ptr& reply) {
  auto o = std::make_shared<op>(deadline);
  o->key = std::move(full_key);
  o->params = params;
  o->limit = limit;
  o->handler = std::move(handler);
  apply(o, o->fsm.on_handed_back(*reply, node, clock::now()));
}

namespace {

// A slot step's undecoded reply, decoded for its handler (a step followed alone).
reply_handler slot_reply_handler(slot_handler handler) {
  return [handler = std::move(handler)](std::error_code ec, reply_ptr reply) {
    slot_reply r;
    if (!ec) ec = to_slot_reply(*reply, r);
    handler(ec, ec ? slot_reply{} : r);
  };
}

}  // namespace

void cluster_client::submit_slot(std::string full_key, const slot_request& request,
                                 slot_handler handler) {
  if (auto owner = owner_of(full_key)) {
    owner->submit_slot(std::move(full_key), request, std::move(handler));
    return;
  }
  // No map yet, or no master for the slot: alone, as any other script call.
  submit_script(slot_script(std::move(full_key), request), slot_reply_handler(std::move(handler)));
}

void cluster_client::follow_slot(const node_address& node, std::string full_key,
                                 const slot_request& request, clock::time_point deadline,
                                 slot_handler handler, const reply_ptr& reply) {
  auto o = std::make_shared<op>(deadline);
  o->key = full_key;
  o->other = std::make_unique<op::other_call>();
  o->other->request =
      std::make_shared<const script_request>(slot_script(std::move(full_key), request));
  o->other->handler = slot_reply_handler(std::move(handler));
  apply(o, o->fsm.on_handed_back(*reply, node, clock::now()));
}

void cluster_client::submit_multi(multi_kind kind, std::vector<std::string> full_keys,
                                  std::vector<detail::limit_params> params,
                                  std::vector<std::uint64_t> capacities,
                                  decide_all_handler handler) {
  auto o = std::make_shared<op>(clock::now() + options_.command_timeout);
  o->multi = std::make_unique<op::multi_call>();
  o->key = full_keys.empty() ? std::string() : full_keys.front();
  o->multi->kind = kind;
  o->multi->keys = std::move(full_keys);
  o->multi->params = std::move(params);
  o->multi->capacities = std::move(capacities);
  o->multi->handler = std::move(handler);
  if (kind == multi_kind::refund) refunds_.fetch_add(1, std::memory_order_relaxed);
  route(o);
}

void cluster_client::submit_script(script_request request, reply_handler handler) {
  auto o = std::make_shared<op>(clock::now() + options_.command_timeout);
  o->other = std::make_unique<op::other_call>();
  o->key = request.keys.empty() ? std::string() : request.keys.front();
  o->other->request = std::make_shared<const script_request>(std::move(request));
  o->other->handler = std::move(handler);
  route(o);
}

void cluster_client::route(const std::shared_ptr<op>& o) {
  const std::uint16_t slot = key_slot(o->key);
  std::shared_ptr<const routing> r;
  {
    std::lock_guard lock(mu_);
    r = routing_;  // null once stopped: the seed path below then refuses the call
  }
  node_address node;
  std::shared_ptr<decision_batcher> queue;  // the node's one queue of script calls
  if (r && r->map) {
    const slot_range* range = r->map->range_of(slot);
    if (!range) {
      // No master serves the slot (a failover in progress): fail now, look again.
      request_refresh();
      finish(o, make_error_code(errc::backend_unavailable));
      return;
    }
    node = range->master;
    queue = r->owners[static_cast<std::size_t>(range - r->map->ranges().data())].batcher;
  } else {
    // No map yet: any seed answers, with MOVED if the slot is elsewhere.
    const auto& seed =
        url_.seeds[next_seed_.fetch_add(1, std::memory_order_relaxed) % url_.seeds.size()];
    node = {seed.host, seed.port};
    queue = link_for(node).batcher;
    request_refresh();
  }
  if (!queue) {
    finish(o, make_error_code(errc::backend_shutting_down));
    return;
  }
  // The node's queue is FIFO and nothing passes an opaque call in it: a refund queued from
  // a completion is sent before the caller's next check on that node.
  send(o, node, queue, false);
}

void cluster_client::send(const std::shared_ptr<op>& o, const node_address& node,
                          const std::shared_ptr<decision_batcher>& queue, bool asking) {
  queue->submit_call(o->fsm.deadline(), attempt{shared_from_this(), o, node, asking},
                     asking ? 2u : 1u);
}

void cluster_client::on_reply(const std::shared_ptr<op>& o, const node_address& node,
                              std::error_code ec, reply_ptr reply) {
  if (o->done.load(std::memory_order_acquire)) return;  // timed out meanwhile
  auto step = o->fsm.on_reply(ec, reply.get(), node, clock::now());
  if (step.what != op_step::kind::decode) return apply(o, std::move(step));
  if (o->other) {
    if (o->done.exchange(true, std::memory_order_acq_rel)) return;
    auto h = std::move(o->other->handler);
    h(ec, std::move(reply));
    return;
  }
  if (o->multi) {
    std::vector<decision> ds;
    if (o->multi->kind == multi_kind::decide) {
      ec = to_decisions(*reply, o->multi->capacities, ds);
    } else if (reply->type != REDIS_REPLY_INTEGER) {
      ec = make_error_code(is_error(*reply) ? errc::backend_script_error
                                            : errc::backend_protocol_error);
    }
    finish_all(o, ec, std::move(ds));
    return;
  }
  decision d;
  ec = to_decision(*reply, o->limit, d);
  finish(o, ec, d);
}

void cluster_client::apply(const std::shared_ptr<op>& o, op_step s) {
  if (s.moved) moved_.fetch_add(1, std::memory_order_relaxed);
  if (s.ask) ask_.fetch_add(1, std::memory_order_relaxed);
  if (s.refresh) request_refresh();
  switch (s.what) {
    case op_step::kind::retry: {
      auto queue = link_for(s.target).batcher;
      if (!queue) {
        finish(o, make_error_code(errc::backend_shutting_down));
        return;
      }
      send(o, s.target, queue, s.asking);
      return;
    }
    case op_step::kind::fail:
      if (o->fsm.redirects() > max_redirects) {
        sluice::detail::logf(sluice::log_level::debug,
                             "sluice cluster: giving up on {} after {} redirections", o->key,
                             max_redirects);
      }
      finish(o, s.ec);
      return;
    case op_step::kind::decode:
      break;  // on_reply decodes
  }
}

void cluster_client::finish(const std::shared_ptr<op>& o, std::error_code ec, const decision& d) {
  if (o->other) {
    if (o->done.exchange(true, std::memory_order_acq_rel)) return;
    auto h = std::move(o->other->handler);
    h(ec ? ec : make_error_code(errc::backend_protocol_error), nullptr);
    return;
  }
  if (o->multi) {
    finish_all(o, ec, {});
    return;
  }
  if (o->done.exchange(true, std::memory_order_acq_rel)) return;
  auto h = std::move(o->handler);
  h(ec, d);
}

void cluster_client::finish_all(const std::shared_ptr<op>& o, std::error_code ec,
                                std::vector<decision> ds) {
  if (o->done.exchange(true, std::memory_order_acq_rel)) return;
  if (ec && o->multi->kind == multi_kind::refund) {
    refund_failures_.fetch_add(1, std::memory_order_relaxed);
    sluice::detail::logf(sluice::log_level::debug, "sluice cluster: refund for {} failed: {}",
                         o->key, ec.message());
  }
  auto h = std::move(o->multi->handler);
  h(ec, ec ? std::vector<decision>{} : std::move(ds));
}

void cluster_client::request_refresh() {
  // One post per burst of requests; start_refresh() clears the flag.
  if (refresh_wanted_.exchange(true, std::memory_order_acq_rel)) return;
  asio::post(io_, [self = shared_from_this()] { self->start_refresh(); });
}

void cluster_client::start_refresh() {
  refresh_wanted_.store(false, std::memory_order_release);
  {
    std::lock_guard lock(mu_);
    if (stopped_) return;
  }
  run_refresh(refresh_.request(clock::now()));
}

void cluster_client::run_refresh(refresh_fsm::step next) {
  switch (next.what) {
    case refresh_fsm::step::kind::nothing:
      return;
    case refresh_fsm::step::kind::wait:
      refresh_timer_.expires_at(next.at);
      refresh_timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
        if (ec) return;  // stopped
        {
          std::lock_guard lock(self->mu_);
          if (self->stopped_) return;
        }
        self->run_refresh(self->refresh_.on_wakeup(clock::now()));
      });
      return;
    case refresh_fsm::step::kind::start:
      break;
  }

  // Ask nodes that are up first, then the rest of the map (masters, then replicas), then
  // the seeds: any node knows the whole layout.
  auto candidates = std::make_shared<std::vector<node_address>>();
  std::vector<node_address> others;
  {
    std::lock_guard lock(mu_);
    std::vector<node_address> all;
    if (routing_ && routing_->map) {
      all = routing_->map->masters();
      for (const auto& n : routing_->map->nodes())
        if (std::find(all.begin(), all.end(), n) == all.end()) all.push_back(n);
    }
    for (const auto& s : url_.seeds) {
      node_address n{s.host, s.port};
      if (std::find(all.begin(), all.end(), n) == all.end()) all.push_back(n);
    }
    for (auto& n : all) {
      const auto it = nodes_.find(n);
      const bool up =
          it != nodes_.end() && it->second.conn->current_state() == connection::state::up;
      (up ? *candidates : others).push_back(std::move(n));
    }
  }
  candidates->insert(candidates->end(), others.begin(), others.end());
  refresh_from(std::move(candidates), 0);
}

void cluster_client::refresh_from(std::shared_ptr<std::vector<node_address>> candidates,
                                  std::size_t i) {
  if (i >= candidates->size()) {
    refresh_done(false);
    return;
  }
  auto conn = link_for((*candidates)[i]).conn;
  if (!conn) {
    refresh_done(false);
    return;
  }
  std::string command;
  append_command(command, {"CLUSTER", "SLOTS"});
  // Control traffic: the connection's own small path, beside the script calls' queue.
  conn->async_control(std::move(command), [self = shared_from_this(), candidates, i](
                                              std::error_code ec, reply_ptr reply) {
    if (!ec && reply) {
      std::string why;
      auto map = parse_cluster_slots(*reply, (*candidates)[i].host, &why);
      if (map && !map->empty()) {
        self->install(std::move(*map));
        self->refresh_done(true);
        return;
      }
      sluice::detail::logf(sluice::log_level::debug, "sluice cluster: {} gave no slot map: {}",
                           (*candidates)[i].to_string(), map ? "no slots assigned" : why);
    }
    // Inline refusals (a node known to be down) come straight back here: the
    // recursion is as deep as the candidate list, no deeper.
    self->refresh_from(candidates, i + 1);
  });
}

void cluster_client::refresh_done(bool ok) {
  const auto end = refresh_.on_round_done(ok);
  {
    std::lock_guard lock(mu_);
    if (stopped_) return;
  }
  if (ok) {
    refreshes_.fetch_add(1, std::memory_order_relaxed);
  } else {
    refresh_failures_.fetch_add(1, std::memory_order_relaxed);
    if (end.warn) {
      sluice::detail::logf(
          sluice::log_level::warn,
          "sluice cluster: no node answered CLUSTER SLOTS; retrying in the background");
    }
  }
  if (end.start_again) run_refresh(refresh_.request(clock::now()));
}

void cluster_client::install(slot_map map) {
  auto r = std::make_shared<routing>();
  r->map = std::make_shared<const slot_map>(std::move(map));
  for (const auto& range : r->map->ranges()) {
    auto link = link_for(range.master);
    if (!link.conn) return;  // stopped
    r->owners.push_back(std::move(link));
  }
  bool changed = true;
  {
    std::lock_guard lock(mu_);
    if (routing_ && routing_->map) {
      const auto& a = routing_->map->ranges();
      const auto& b = r->map->ranges();
      changed = a.size() != b.size() ||
                !std::equal(a.begin(), a.end(), b.begin(), [](const auto& x, const auto& y) {
                  return x.first == y.first && x.last == y.last && x.master == y.master;
                });
    }
    routing_ = r;
  }
  if (changed) {
    sluice::detail::logf(sluice::log_level::info,
                         "sluice cluster: slot map: {} ranges on {} masters{}",
                         r->map->ranges().size(), r->map->masters().size(),
                         r->map->covers_all_slots() ? "" : " (some slots have no master)");
  }
}

}  // namespace sluice::redis::cluster
