#include "redis/sentinel/sentinel_source.hpp"

#include <condition_variable>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "redis/connection.hpp"
#include "redis/handshake.hpp"
#include "redis/resp.hpp"
#include "redis/sentinel/sentinel_fsm.hpp"

namespace sluice::redis {

namespace asio = boost::asio;

class sentinel_source final : public address_source,
                              public std::enable_shared_from_this<sentinel_source> {
 public:
  sentinel_source(asio::io_context& io, const redis_options& o, const redis_sentinel_url& u,
                  tls_config tls)
      : io_(io),
        poll_timer_(io),
        down_timer_(io),
        fsm_(u.sentinels.size(), u.master_name, sentinel_ask_min_interval,
             [this](std::size_t i) { ask(i); }) {
    append_command(question_, {"SENTINEL", "get-master-addr-by-name", u.master_name});
    for (const auto& s : u.sentinels) {
      connection_config c;
      c.host = s.host;
      c.port = s.port;
      c.connect_timeout = o.connect_timeout;
      c.command_timeout = o.command_timeout;
      c.backoff_min = o.reconnect_backoff_min;
      c.backoff_max = o.reconnect_backoff_max;
      c.name = "sluice sentinel " + s.host + ":" + std::to_string(s.port);
      c.tls = tls;
      c.handshake = make_handshake({.role = handshake_role::sentinel,
                                    .user = u.sentinel_user,
                                    .password = u.sentinel_password});
      sentinels_.push_back(std::make_shared<connection>(io, std::move(c)));
    }
    fsm_.on_round_end([this] {
      {
        std::lock_guard lock(mu_);
        answered_ = true;
      }
      cv_.notify_all();
    });
  }

  void start(moved_handler moved) override {
    // Posted: the connection is told of a move from a handler of its own, never from inside
    // one of its calls (suspect() runs in a reply's handler).
    fsm_.on_moved([this, moved = std::move(moved)](const server_address& a) {
      asio::post(io_, [moved, a] { moved(a); });
    });
    for (auto& s : sentinels_) s->start();
    arm_poll();
  }

  void resolve(resolve_handler done) override {
    fsm_.resolve(std::chrono::steady_clock::now(), std::move(done));
  }
  void suspect() override { fsm_.suspect(std::chrono::steady_clock::now()); }

  // While the master's connection is down, as when every call failed: ask again at most
  // every 100 ms (a round that names another master moves the connection there at once,
  // whatever its backoff).
  void link_down() override {
    if (fsm_.stopped()) return;
    fsm_.link_down(std::chrono::steady_clock::now());
    if (!down_timer_armed_) arm_down_timer();
  }
  void link_up() override { fsm_.link_up(); }

  // On the I/O thread (connection::stop posts it), as are the timers' handlers and
  // link_down(): the state machine's stopped() needs no lock.
  void stop() override {
    {
      std::lock_guard lock(mu_);
      answered_ = true;
    }
    cv_.notify_all();
    fsm_.stop();
    poll_timer_.cancel();
    down_timer_.cancel();
    for (auto& s : sentinels_) s->stop();
  }

  std::uint64_t moves() const noexcept override { return fsm_.moves(); }

  void wait_for_first_answer(std::chrono::milliseconds within) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, within, [&] { return answered_; });
  }

 private:
  void ask(std::size_t i) {
    sentinels_[i]->async_control(question_,
                                 [self = shared_from_this(), i](std::error_code ec, reply_ptr r) {
                                   self->fsm_.on_answer(i, ec, r.get());
                                 });
  }

  void arm_poll() {
    poll_timer_.expires_after(sentinel_poll_interval);
    poll_timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      // Stopped: cancel() does not reach a wait that completed before it, so the handler
      // may still run with no error, and must not arm the timer again (the I/O thread's
      // run() would never run out of work, and the backend's destructor would wait forever).
      if (ec || self->fsm_.stopped()) return;
      self->fsm_.poll(std::chrono::steady_clock::now());
      self->arm_poll();
    });
  }

  void arm_down_timer() {
    down_timer_armed_ = true;
    down_timer_.expires_after(sentinel_ask_min_interval);
    down_timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      self->down_timer_armed_ = false;
      if (ec || self->fsm_.stopped() || !self->fsm_.down()) return;
      self->fsm_.down_tick(std::chrono::steady_clock::now());
      self->arm_down_timer();
    });
  }

  asio::io_context& io_;
  std::string question_;
  std::vector<std::shared_ptr<connection>> sentinels_;
  asio::steady_timer poll_timer_;
  asio::steady_timer down_timer_;
  bool down_timer_armed_ = false;   // I/O thread only
  sentinel::sentinel_address fsm_;  // I/O thread only (but moves())

  std::mutex mu_;
  std::condition_variable cv_;
  bool answered_ = false;
};

std::shared_ptr<sentinel_source> make_sentinel_source(asio::io_context& io,
                                                      const redis_options& options,
                                                      const redis_sentinel_url& url,
                                                      tls_config tls) {
  return std::make_shared<sentinel_source>(io, options, url, std::move(tls));
}

void wait_for_first_answer(sentinel_source& s, std::chrono::milliseconds within) {
  s.wait_for_first_answer(within);
}

std::shared_ptr<address_source> as_address_source(std::shared_ptr<sentinel_source> s) { return s; }

}  // namespace sluice::redis
