#pragma once
// Where a request's answer is written: on the connection's own executor. A decision that
// completes on that thread already (the memory backend, a cached denial, a Redis
// connection that runs on this server thread) is answered at once; one that completes on
// another thread (a Redis connection's I/O thread) is posted, coalesced with the other
// completions that the same reply brings for that io_context. No endpoint asks which
// backend it has.
#include <typeinfo>
#include <utility>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/io_context.hpp>

#include <sluice/completion.hpp>

namespace sluice::daemon {

template <class F>
void complete_on(const boost::asio::any_io_executor& ex, F&& f) {
  // Boost 1.74's any_executor::target<T>() does not check the type: check it first.
  if (ex.target_type() == typeid(boost::asio::io_context::executor_type) &&
      ex.target<boost::asio::io_context::executor_type>()->running_in_this_thread()) {
    std::forward<F>(f)();
    return;
  }
  sluice::post_completion(ex, std::forward<F>(f));
}

}  // namespace sluice::daemon
