// make_redis_sentinel_backend: asks Redis Sentinel where the master is and serves from a
// standalone Redis backend (redis::make_standalone_backend) on that address. Sentinels get
// AUTH with their own credentials (sentinel_password=); the master gets the URL's user
// info; with rediss+sentinel:// both use TLS, with one TLS context for the whole backend. The
// sentinels are asked again when a call fails (connection lost, timeout, READONLY from a demoted
// master) and every sentinel_poll_interval; whom to ask, what an answer means and when to ask
// again are the resolver's (sentinel_fsm.hpp: no I/O, unit-tested). Sentinel is an address
// source: when the answer changes, the master backend's one connection is pointed at the new
// master (nothing is rebuilt). One I/O thread serves the sentinels and the master backend
// (built with run_on = its io_context). Calls written to the old master end as backend
// errors, which the limiter turns into the failure mode; calls not yet written go to the new
// one.
#include <sluice/error.hpp>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <stdexcept>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "core/log.hpp"
#include "redis/connection.hpp"
#include "redis/engine/io_runner.hpp"
#include "redis/engine/options.hpp"
#include "redis/handshake.hpp"
#include "redis/resp.hpp"
#include "redis/sentinel/sentinel_fsm.hpp"
#include "redis/standalone_backend.hpp"
#include "redis/tls.hpp"
#include "redis/topology_backends.hpp"

namespace sluice {
namespace {
namespace asio = boost::asio;
using clock_type = std::chrono::steady_clock;

// Sentinels are polled this often even when all is well, so a failover that leaves the
// old master reachable (SENTINEL FAILOVER, a network split) is noticed without errors.
constexpr std::chrono::milliseconds sentinel_poll_interval{1000};
// Asking again because calls fail happens at most this often.
constexpr std::chrono::milliseconds sentinel_ask_min_interval{100};

using redis::sentinel::master_address;
using redis::sentinel::resolver;

class sentinel_core : public std::enable_shared_from_this<sentinel_core> {
 public:
  sentinel_core(redis_options options, redis_sentinel_url url, redis::tls_config tls)
      : runner(redis::io_runner::own("sluice sentinel")),
        io(runner->io()),
        options_(std::move(options)),
        url_(std::move(url)),
        tls_(std::move(tls)),
        poll_timer_(io),
        resolver_(url_.sentinels.size(), sentinel_ask_min_interval) {}

  // The one I/O thread: the Sentinel connections', and the master backend's (built with
  // run_on = this io_context), so Sentinel adds no thread of its own.
  const std::shared_ptr<redis::io_runner> runner;
  asio::io_context& io;

  void start() {
    for (const auto& s : url_.sentinels) {
      redis::connection_config c;
      c.host = s.host;
      c.port = s.port;
      c.connect_timeout = options_.connect_timeout;
      c.command_timeout = options_.command_timeout;
      c.backoff_min = options_.reconnect_backoff_min;
      c.backoff_max = options_.reconnect_backoff_max;
      c.name = "sluice sentinel " + s.host + ":" + std::to_string(s.port);
      c.tls = tls_;
      c.handshake = redis::make_handshake({.role = redis::handshake_role::sentinel,
                                           .user = url_.sentinel_user,
                                           .password = url_.sentinel_password});
      auto conn = std::make_shared<redis::connection>(io, std::move(c));
      conn->start();
      sentinels_.push_back(std::move(conn));
    }
    asio::post(io, [self = shared_from_this()] {
      self->run(self->resolver_.poll(clock_type::now()));
      self->arm_poll();
    });
  }

  // Stops the sentinel connections and timers (posted); the caller then ends the thread.
  void stop() {
    {
      std::lock_guard lock(mu_);
      stopped_ = true;
    }
    for (auto& s : sentinels_) s->stop();
    asio::post(io, [self = shared_from_this()] { self->poll_timer_.cancel(); });
  }

  // The master backend's counters (one backend, whichever master it points at).
  backend_stats stats() {
    std::lock_guard lock(mu_);
    backend_stats s;
    if (current_) {
      s = current_->stats();
    } else {
      s.up = false;
    }
    s.failovers = failovers_;
    return s;
  }

  // The master's backend; null before the first answer or after stop().
  std::shared_ptr<redis::standalone_backend> current() {
    std::lock_guard lock(mu_);
    return current_;
  }
  std::shared_ptr<redis::standalone_backend> take_current() {
    std::lock_guard lock(mu_);
    return std::exchange(current_, nullptr);
  }

  // Waits (up to `within`) for the first answer, so the first calls have a master.
  void wait_for_master(std::chrono::milliseconds within) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, within, [&] { return current_ != nullptr || stopped_; });
  }

  // Any thread: a call failed in a way a failover explains.
  void request_ask() {
    if (ask_wanted_.exchange(true)) return;
    asio::post(io, [self = shared_from_this()] {
      self->ask_wanted_ = false;
      self->run(self->resolver_.request(clock_type::now()));
    });
  }

 private:
  void arm_poll() {
    poll_timer_.expires_after(sentinel_poll_interval);
    poll_timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (ec) return;
      self->run(self->resolver_.poll(clock_type::now()));
      self->arm_poll();
    });
  }

  // I/O thread: does what the resolver said.
  void run(const resolver::step& next) {
    switch (next.what) {
      case resolver::step::kind::nothing:
        return;
      case resolver::step::kind::ask:
        ask(next.sentinel);
        return;
      case resolver::step::kind::use:
        use(next.master);
        return;
      case resolver::step::kind::no_master:
        if (next.warn) {
          sluice::detail::logf(sluice::log_level::warn,
                               "sluice sentinel: no sentinel knows master \"{}\"; asking again",
                               url_.master_name);
        }
        return;
    }
  }

  // Sends the question to sentinel i; its answer goes to the resolver.
  void ask(std::size_t i) {
    {
      std::lock_guard lock(mu_);
      if (stopped_) return;
    }
    std::string cmd;
    redis::append_command(cmd, {"SENTINEL", "get-master-addr-by-name", url_.master_name});
    // Control traffic: the sentinel connection's control path.
    sentinels_[i]->async_control(
        std::move(cmd), [self = shared_from_this(), i](std::error_code ec, redis::reply_ptr r) {
          self->run(self->resolver_.on_answer(i, ec, r.get()));
        });
  }

  // I/O thread: the master is at `a`. The first answer builds the backend; a new address
  // after that points its connection there (Sentinel is an address source: nothing is
  // rebuilt, and what the backend counts stays with it).
  void use(const master_address& a) {
    std::shared_ptr<redis::standalone_backend> b;
    {
      std::lock_guard lock(mu_);
      if (stopped_) return;
      b = current_;
    }
    if (b) {
      sluice::detail::logf(sluice::log_level::info,
                           "sluice sentinel: master \"{}\" is {}:{} (failed over)",
                           url_.master_name, a.host, a.port);
      resolver_.serving(a);
      b->retarget(a.host, a.port);
      std::lock_guard lock(mu_);
      ++failovers_;
      return;
    }
    redis_url u;
    u.user = url_.user;
    u.password = url_.password;
    u.host = a.host;
    u.port = a.port;
    u.db = url_.db;
    // On this I/O thread: the master's connection and batching need no thread of their own.
    auto on_this_thread = options_;
    on_this_thread.run_on = &io;
    try {
      b = redis::make_standalone_backend(on_this_thread, u, tls_);
    } catch (const std::exception& e) {
      sluice::detail::logf(sluice::log_level::error, "sluice sentinel: cannot use master {}:{}: {}",
                           a.host, a.port, e.what());
      return;
    }
    sluice::detail::logf(sluice::log_level::info, "sluice sentinel: master \"{}\" is {}:{}",
                         url_.master_name, a.host, a.port);
    resolver_.serving(a);
    {
      std::lock_guard lock(mu_);
      if (stopped_) return;  // `b` is released here, on its I/O thread: it stops there
      current_ = std::move(b);
    }
    cv_.notify_all();
  }

  const redis_options options_;
  const redis_sentinel_url url_;
  const redis::tls_config tls_;
  std::vector<std::shared_ptr<redis::connection>> sentinels_;
  asio::steady_timer poll_timer_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::shared_ptr<redis::standalone_backend> current_;
  std::uint64_t failovers_ = 0;
  bool stopped_ = false;

  std::atomic<bool> ask_wanted_{false};
  resolver resolver_;  // I/O thread only
};

bool worth_asking_again(std::error_code ec) {
  // Everything a moved master explains: lost or refused connections, silence, and error
  // replies such as READONLY from a master that was demoted to a replica (classify_reply's
  // rediscover_master, which the standalone backend reports as a script error).
  return ec == errc::backend_unavailable || ec == errc::backend_timeout ||
         ec == errc::backend_script_error || ec == errc::backend_protocol_error;
}

// `handler`, after asking the sentinels again when its error may mean a failover.
template <class Handler>
auto asking_again(const std::shared_ptr<sentinel_core>& core, Handler handler) {
  return [weak = std::weak_ptr<sentinel_core>(core), handler = std::move(handler)](
             std::error_code ec, auto result) {
    if (worth_asking_again(ec)) {
      if (auto c = weak.lock()) c->request_ask();
    }
    handler(ec, std::move(result));
  };
}

class sentinel_backend final : public backend {
 public:
  sentinel_backend(const redis_options& o, const redis_sentinel_url& u)
      // The TLS files are loaded here, before any thread starts: a bad one throws.
      : core_(std::make_shared<sentinel_core>(o, u, redis::make_tls_config(u.tls))) {
    core_->start();
    core_->runner->start();
    core_->wait_for_master(o.connect_timeout);
  }

  ~sentinel_backend() override {
    // The master backend first: it runs on the core's thread (run_on), so its stops are
    // posted there before the thread finishes what is posted and ends.
    core_->take_current().reset();
    core_->stop();
    core_->runner->finish();
  }

  backend_stats stats() const noexcept override { return core_->stats(); }

  std::error_code decide(std::string_view key, const policy& p, std::uint64_t cost,
                         decision& out) override {
    auto b = core_->current();
    if (!b) {
      core_->request_ask();
      return make_error_code(errc::backend_unavailable);
    }
    const auto ec = b->decide(key, p, cost, out);
    if (worth_asking_again(ec)) core_->request_ask();
    return ec;
  }

  std::error_code operate(std::string_view key, const policy& p, key_operation op,
                          std::uint64_t amount, decision& out) override {
    auto b = core_->current();
    if (!b) {
      core_->request_ask();
      return make_error_code(errc::backend_unavailable);
    }
    const auto ec = b->operate(key, p, op, amount, out);
    if (worth_asking_again(ec)) core_->request_ask();
    return ec;
  }

  std::error_code decide_all(std::span<const check_item> items,
                             std::vector<decision>& out) override {
    auto b = core_->current();
    if (!b) {
      core_->request_ask();
      return make_error_code(errc::backend_unavailable);
    }
    // The master's standalone backend: one atomic script for all the keys.
    const auto ec = b->decide_all(items, out);
    if (worth_asking_again(ec)) core_->request_ask();
    return ec;
  }

  // Every asynchronous request goes to the current master's backend; none while there is
  // none (a failover in progress), and a failure that may mean the master moved asks the
  // Sentinels again.
  void async_decide_all(std::span<const check_item> items, decide_all_handler handler) override {
    on_master(std::move(handler),
              [&](backend& b, auto h) { b.async_decide_all(items, std::move(h)); });
  }

  void async_decide(std::string_view key, const policy& p, std::uint64_t cost,
                    decide_handler handler) override {
    on_master(std::move(handler),
              [&](backend& b, auto h) { b.async_decide(key, p, cost, std::move(h)); });
  }

  void async_operate(std::string_view key, const policy& p, key_operation op, std::uint64_t amount,
                     decide_handler handler) override {
    on_master(std::move(handler),
              [&](backend& b, auto h) { b.async_operate(key, p, op, amount, std::move(h)); });
  }

  void async_lease(std::string_view key, const policy& p, const lease_request& request,
                   lease_handler handler) override {
    on_master(std::move(handler),
              [&](backend& b, auto h) { b.async_lease(key, p, request, std::move(h)); });
  }

  void async_lease_return(std::string_view key, const policy& p, std::uint64_t units,
                          std::int64_t granted_at_ms, decide_handler handler) override {
    on_master(std::move(handler), [&](backend& b, auto h) {
      b.async_lease_return(key, p, units, granted_at_ms, std::move(h));
    });
  }

  void async_slot(std::string_view key, const slot_request& request,
                  slot_handler handler) override {
    on_master(std::move(handler),
              [&](backend& b, auto h) { b.async_slot(key, request, std::move(h)); });
  }

 private:
  template <class Handler, class Call>
  void on_master(Handler handler, Call call) {
    auto b = core_->current();
    if (!b) {
      core_->request_ask();
      handler(make_error_code(errc::backend_unavailable), {});
      return;
    }
    call(*b, asking_again(core_, std::move(handler)));
  }

  std::shared_ptr<sentinel_core> core_;
};

}  // namespace

std::shared_ptr<backend> make_redis_sentinel_backend(redis_options options) {
  std::string why;
  const auto url = parse_redis_sentinel_url(options.url, &why);
  if (!url) throw std::invalid_argument("invalid Redis Sentinel URL: " + why);
  // Every master's backend is built from these options: checked here, once.
  redis::validate_options(options, redis::topology::sentinel);
  return std::make_shared<sentinel_backend>(options, *url);
}

}  // namespace sluice
