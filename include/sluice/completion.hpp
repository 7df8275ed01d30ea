#pragma once
/// How the library's asynchronous operations hand their completions to the caller's
/// executor: sluice::post_completion, which limiter::async_check and the other async forms
/// (and http::async_evaluate) use, for adapters that complete the same way.
///
/// A backend that completes many operations at once (one Redis reply answering a batch of
/// decisions) groups them on its thread: the completions bound to one io_context are then
/// posted to it as one operation, so that io_context's thread is woken once per reply
/// instead of once per decision, and its queue's mutex is taken once. Outside such a group
/// a completion is posted on its own, as boost::asio::post would.
#include <functional>
#include <memory>
#include <optional>
#include <type_traits>
#include <typeinfo>
#include <utility>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/system_executor.hpp>

namespace sluice {

/// True for the executor types of an io_context (whatever their allocator and properties):
/// the executors whose completions post_completion() can group.
template <class Executor>
inline constexpr bool is_io_context_executor_v = false;
template <class Allocator, unsigned int Bits>
inline constexpr bool
    is_io_context_executor_v<boost::asio::io_context::basic_executor_type<Allocator, Bits>> = true;

/// Whether a backend is completing several operations at once on this thread, so that
/// post_grouped() would hold completions back until it is done. Thread-safe.
bool completions_grouped() noexcept;

/// Posts `fn` to `ctx` (never runs it inline). While completions_grouped(), `fn` joins the
/// other completions for `ctx` instead, in order, and they are posted as one operation
/// when the backend is done (`ctx` keeps outstanding work until then; if one throws or
/// stops `ctx`, the ones after it are posted again, so none is lost). Thread-safe.
void post_grouped(boost::asio::io_context& ctx, std::function<void()> fn);

/// Posts the completion `f` to `ex`, never running it inline. When `ex` is an io_context's
/// executor (also inside an any_io_executor) and a backend is completing many operations at
/// once on this thread, `f` is grouped with the other completions for that io_context
/// (post_grouped()); otherwise (a lone completion, a thread pool's or a strand's executor)
/// it is posted on its own, with no type erasure on the way. Thread-safe.
template <class Executor, class F>
void post_completion(const Executor& ex, F&& f) {
  boost::asio::io_context* ctx = nullptr;
  if constexpr (is_io_context_executor_v<Executor>) {
    ctx = &ex.context();
  } else if constexpr (std::is_same_v<Executor, boost::asio::any_io_executor>) {
    // Boost 1.74's any_executor::target<T>() casts whatever it holds to T without checking
    // (later Boosts return null for another type): a strand, a thread pool's executor would
    // be taken for an io_context's. Check the type first.
    if (ex.target_type() == typeid(boost::asio::io_context::executor_type)) {
      ctx = &ex.template target<boost::asio::io_context::executor_type>()->context();
    }
  }
  if (ctx != nullptr && completions_grouped()) {
    post_grouped(*ctx, std::function<void()>(std::forward<F>(f)));
  } else {
    boost::asio::post(ex, std::forward<F>(f));
  }
}

namespace detail {

/// An async operation's completion handler, parked until a type-erased start function
/// (which takes a copyable std::function) completes the operation where the backend does.
/// post() moves the handler out and posts it to its associated executor (whose work is held
/// until then), so the handler is destroyed on the thread that ran it: the copies of the
/// callback that remain (the initiating frame's, a std::function's) hold an empty parking
/// place, whichever thread drops them last. Copyable; post() is called at most once.
template <class Handler>
class parked_handler {
 public:
  explicit parked_handler(Handler handler) : place_(std::make_shared<place>(std::move(handler))) {}

  /// Posts `finish(handler)` to the handler's executor. `finish` must be copyable (a
  /// grouped completion travels in a std::function): a move-only argument goes in a
  /// shared_ptr.
  template <class Finish>
  void post(Finish finish) const {
    auto work = std::move(*place_->work);
    place_->work.reset();
    // The only reference to the handler from here on is the posted operation's.
    auto h = std::make_shared<Handler>(std::move(*place_->handler));
    place_->handler.reset();
    post_completion(work.get_executor(),
                    [h = std::move(h), finish = std::move(finish)]() mutable { finish(*h); });
  }

 private:
  using executor = boost::asio::associated_executor_t<Handler, boost::asio::system_executor>;
  struct place {
    explicit place(Handler h)
        : work(boost::asio::make_work_guard(
              boost::asio::get_associated_executor(h, boost::asio::system_executor()))),
          handler(std::move(h)) {}
    std::optional<boost::asio::executor_work_guard<executor>> work;
    std::optional<Handler> handler;
  };
  std::shared_ptr<place> place_;
};

}  // namespace detail

}  // namespace sluice
