#pragma once
// The EVAL retry after NOSCRIPT is a second request, which the connection would give a whole
// command timeout of its own. A guard holds the decision's handler with a timer at the first
// attempt's deadline: whichever comes first, the retry's reply or the deadline, completes it
// (both on the I/O thread), so a decision never takes longer than one command timeout.
#include <chrono>
#include <memory>
#include <system_error>
#include <type_traits>
#include <utility>

#include <sluice/error.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

namespace sluice::redis {

template <class Handler>
struct deadline_guard {
  deadline_guard(boost::asio::io_context& io, Handler h) : timer(io), handler(std::move(h)) {}
  boost::asio::steady_timer timer;
  Handler handler;  // empty once called

  template <class Result>
  void complete(std::error_code ec, Result&& r) {
    if (!handler) return;
    timer.cancel();
    std::exchange(handler, nullptr)(ec, std::forward<Result>(r));
  }
};

/// Null (and `handler` completed with backend_timeout) when the deadline has passed already.
template <class Handler>
std::shared_ptr<deadline_guard<std::decay_t<Handler>>> guard_until(
    boost::asio::io_context& io, std::chrono::steady_clock::time_point deadline,
    Handler&& handler) {
  if (std::chrono::steady_clock::now() >= deadline) {
    handler(make_error_code(errc::backend_timeout), {});
    return nullptr;
  }
  auto g = std::make_shared<deadline_guard<std::decay_t<Handler>>>(io, std::move(handler));
  g->timer.expires_at(deadline);
  g->timer.async_wait([g](boost::system::error_code ec) {
    if (ec || !g->handler) return;
    std::exchange(g->handler, nullptr)(make_error_code(errc::backend_timeout), {});
  });
  return g;
}

}  // namespace sluice::redis
