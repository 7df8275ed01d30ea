// The Redis backend: decisions are EVALSHA calls of lua/decide.lua, sent over one
// auto-pipelined connection (connection.hpp) that an I/O thread of this backend runs, or the
// caller's io_context (redis_options::run_on).
// A Sentinel deployment is this backend with another address source (address_source.hpp):
// the connection asks the sentinels where the master is when it connects, and is pointed at
// a new one when a poll or a failed call finds it (sentinel/sentinel_source.hpp). Sentinels
// get AUTH with their own credentials (sentinel_password=), the master the URL's user info;
// with rediss+sentinel:// both use TLS, with one TLS context. Calls written to the old master
// end as backend errors, which the limiter turns into the failure mode; calls not yet written
// go to the new one.
#include <sluice/redis_backend.hpp>

#include <sluice/backend_url.hpp>
#include <sluice/error.hpp>
#include <sluice/redis_sentinel.hpp>

#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#include <boost/asio/io_context.hpp>

#include "algorithm/limit.hpp"
#include "core/await_decision.hpp"
#include "core/log.hpp"
#include "redis/connection.hpp"
#include "redis/decide_command.hpp"
#include "redis/decision_batcher.hpp"
#include "redis/engine/engine_backend.hpp"
#include "redis/engine/io_runner.hpp"
#include "redis/engine/options.hpp"
#include "redis/engine/script_exec.hpp"
#include "redis/handshake.hpp"
#include "redis/sentinel/sentinel_source.hpp"
#include "redis/tls.hpp"
#include "redis/topology_backends.hpp"

namespace sluice {
namespace {

// The data node's connection: `host`:`port` unless an address source says otherwise.
redis::connection_config make_config(const redis_options& o, std::string host, std::uint16_t port,
                                     const redis::handshake_options& h, redis::tls_config tls) {
  redis::connection_config c;
  c.tls = std::move(tls);
  c.host = std::move(host);
  c.port = port;
  c.handshake = redis::make_handshake(h);
  c.connect_timeout = o.connect_timeout;
  c.command_timeout = o.command_timeout;
  c.backoff_min = o.reconnect_backoff_min;
  c.backoff_max = o.reconnect_backoff_max;
  c.name = c.tls.context ? "sluice redis (TLS)" : "sluice redis";
  return c;
}

// Builds the connection's address source on the backend's io_context; none: the fixed
// host:port of the config.
using source_factory =
    std::function<std::shared_ptr<redis::address_source>(boost::asio::io_context&)>;

// Whether the I/O thread's polling may pay off: with a call or two outstanding, the next
// event is a reply or a check that soon follows it, and the caller's thread waits for it.
// With more, the callers' threads have work, and the core a polling thread would take from
// them is worth more than the wake-up it saves (on a 2-core machine Redis has the other).
bool lightly_loaded(const redis::decision_batcher& batcher, const redis::connection& conn) {
  constexpr std::size_t few = 2;
  return batcher.accepted() <= few && conn.pending() <= few;
}

// The all-or-nothing script call of decide_all (lua/decide_multi.lua), for script_exec.hpp.
struct multi_call {
  struct keys {
    std::vector<std::string> full_keys;
    std::vector<redis::multi_key> keys;  // views of full_keys
    std::vector<std::uint64_t> capacities;
  };
  std::shared_ptr<const keys> k;
  decide_all_handler handler;
  void append(std::string& out, redis::script_call how) const {
    redis::append_decide_multi_command(out, how, k->keys);
  }
  void operator()(std::error_code ec, const redis::reply_ptr& reply) {
    std::vector<decision> ds;
    if (!ec) ec = redis::to_decisions(*reply, k->capacities, ds);
    handler(ec, ec ? std::vector<decision>{} : std::move(ds));
  }
};

// Any other script call (script_request.hpp), for script_exec.hpp.
struct other_call {
  std::shared_ptr<const redis::script_request> request;
  redis::reply_handler handler;
  void append(std::string& out, redis::script_call how) const { request->append(out, how); }
  void operator()(std::error_code ec, redis::reply_ptr reply) { handler(ec, std::move(reply)); }
};

redis::connection_config with_source(redis::connection_config c, const source_factory& make,
                                     boost::asio::io_context& io) {
  if (make) c.address = make(io);
  return c;
}

class redis_backend final : public redis::engine_backend<> {
 public:
  redis_backend(const redis_options& o, redis::connection_config c,
                const source_factory& make_source = {})
      : engine_backend(
            o, o.run_on ? redis::io_runner::borrowed(*o.run_on) : redis::io_runner::own(c.name)),
        command_timeout_(o.command_timeout),
        conn_(std::make_shared<redis::connection>(
            runner().io(), with_source(std::move(c), make_source, runner().io()))),
        batcher_(std::make_shared<redis::decision_batcher>(
            runner().io(), conn_,
            redis::batcher_options{.max_batch = o.max_batch,
                                   .max_accepted = o.max_in_flight,
                                   .command_timeout = o.command_timeout})) {
    conn_->start();
    // The polling test holds the batcher and the connection, not the backend: the thread
    // may outlive it (see io_runner.hpp).
    runner().start(o.poll_before_sleep.value_or(std::chrono::microseconds{50}),
                   [batcher = batcher_, conn = conn_] { return lightly_loaded(*batcher, *conn); });
  }

  ~redis_backend() override {
    // The batcher first: what waits there fails before the connection's stop is posted. On
    // the caller's io_context the handlers posted by stop() hold the batcher and the
    // connection (shared_from_this) and finish there; nothing waits for them.
    batcher_->stop();
    conn_->stop();
    runner().finish();
  }

  backend_stats stats() const noexcept override {
    backend_stats s;
    const auto sent = batcher_->sent();
    s.in_flight = batcher_->accepted();
    s.up = conn_->current_state() == redis::connection::state::up;
    s.script_calls = sent.calls;
    s.batched_decisions = sent.decisions;
    s.noscript = sent.noscript;
    s.other_script_calls = sent.other_calls;
    s.failovers = conn_->moves();
    return s;
  }

  std::error_code decide_all(std::span<const check_item> items,
                             std::vector<decision>& out) override {
    out.clear();
    if (items.empty()) return {};
    if (on_io_thread()) return make_error_code(errc::backend_unavailable);
    return detail::await_decisions(
        [&](decide_all_handler done) { async_decide_all(items, std::move(done)); }, wait_limit(),
        out);
  }

  void async_decide_all(std::span<const check_item> items, decide_all_handler handler) override {
    if (items.size() <= 1) {
      if (items.empty()) {
        handler({}, {});
        return;
      }
      // One item: the single-key script, exactly as fast as async_decide.
      async_decide(items[0].key, items[0].policy, items[0].cost,
                   [handler = std::move(handler)](std::error_code ec, decision d) {
                     if (ec) return handler(ec, {});
                     handler(ec, std::vector<decision>{d});
                   });
      return;
    }
    auto c = std::make_shared<multi_call::keys>();
    c->full_keys.reserve(items.size());
    for (const auto& it : items) {
      c->full_keys.push_back(full_key(it.key));
      c->capacities.push_back(limit_of(it.policy));
    }
    for (std::size_t i = 0; i < items.size(); ++i) {
      c->keys.push_back({c->full_keys[i], detail::to_limit_params(items[i].policy, items[i].cost)});
    }
    batcher_->submit_call(std::chrono::steady_clock::now() + command_timeout_,
                          multi_call{std::move(c), std::move(handler)});
  }

 private:
  void submit_script(redis::script_request request, redis::reply_handler handler) override {
    batcher_->submit_call(
        std::chrono::steady_clock::now() + command_timeout_,
        other_call{std::make_shared<const redis::script_request>(std::move(request)),
                   std::move(handler)});
  }

  void submit(std::string full_key, const detail::limit_params& params, std::uint64_t limit,
              decide_handler handler) override {
    batcher_->submit(std::move(full_key), params, limit, std::move(handler));
  }

  void submit_slot(std::string full_key, const slot_request& request,
                   slot_handler handler) override {
    batcher_->submit_slot(std::move(full_key), request, std::move(handler));
  }

  std::chrono::milliseconds command_timeout_;
  std::shared_ptr<redis::connection> conn_;
  std::shared_ptr<redis::decision_batcher> batcher_;  // single-key decisions, on conn_
};

}  // namespace

std::shared_ptr<backend> make_redis_backend(std::string_view url, redis_options options) {
  // The one entry point for every Redis URL: the scheme is read here (parse_backend_scheme),
  // the options checked for that topology, and the internal factories get the URL in
  // options.url.
  options.url = std::string(url);
  const auto scheme = parse_backend_scheme(url);
  if (!scheme || scheme->kind == backend_kind::memory) {
    // The scheme only: the rest of a URL may hold a password.
    const auto sep = url.find("://");
    throw std::invalid_argument(
        "not a Redis URL (want redis://, rediss://, redis+cluster://, rediss+cluster://, "
        "redis+sentinel:// or rediss+sentinel://): " +
        (sep == std::string_view::npos ? std::string("no scheme")
                                       : "scheme " + std::string(url.substr(0, sep))));
  }
  if (scheme->kind == backend_kind::redis_cluster) {
    return make_redis_cluster_backend(std::move(options));
  }
  std::string why;
  if (scheme->kind == backend_kind::redis_sentinel) {
    const auto u = parse_redis_sentinel_url(url, &why);
    if (!u) throw std::invalid_argument("invalid Redis Sentinel URL: " + why);
    redis::validate_options(options, redis::topology::sentinel);
    // Loaded once, before any thread starts: a bad file throws. The sentinels' connections
    // and the master's share it.
    auto tls = redis::make_tls_config(u->tls);
    std::shared_ptr<redis::sentinel_source> source;
    auto c = make_config(options, u->master_name, 0,
                         {.user = u->user, .password = u->password, .db = u->db}, tls);
    auto b =
        std::make_shared<redis_backend>(options, std::move(c), [&](boost::asio::io_context& io) {
          source = redis::make_sentinel_source(io, options, *u, tls);
          return redis::as_address_source(source);
        });
    // So the first calls find a master (at most the connect timeout).
    redis::wait_for_first_answer(*source, options.connect_timeout);
    return b;
  }
  const auto u = parse_redis_url(url, &why);
  if (!u) throw std::invalid_argument("invalid Redis URL: " + why);
  redis::validate_options(options, redis::topology::standalone);
  // Loaded once, here: a bad CA, certificate or key is a start-up error, not a per-call one.
  return std::make_shared<redis_backend>(
      options, make_config(options, u->host, u->port,
                           {.user = u->user, .password = u->password, .db = u->db},
                           redis::make_tls_config(u->tls)));
}

}  // namespace sluice
