#pragma once
/// How the asynchronous checks hand their completions to an io_context. A backend that
/// completes many checks at once (one Redis reply answering a batch of decisions) opens a
/// coalescing_scope around them; the completions bound to one io_context are then posted
/// to it as one operation, so that io_context's thread is woken once per reply instead of
/// once per decision, and its queue's mutex is taken once. Outside such a scope a
/// completion is posted on its own, as boost::asio::post would. Not part of the stable API.
#include <functional>

#include <boost/asio/io_context.hpp>

namespace sluice::detail {

/// Posts `fn` to `ctx` (never runs it inline). While a coalescing_scope is open on this
/// thread, `fn` joins the other completions for `ctx` instead, in order, and the scope's
/// end posts them as one operation; `ctx` keeps outstanding work until then.
void post_coalesced(boost::asio::io_context& ctx, std::function<void()> fn);

/// Whether a coalescing_scope is open on this thread (post_coalesced() would hold back).
bool coalescing_open() noexcept;

/// Coalesces post_coalesced() calls made on this thread while it is alive. Nests: the
/// outermost scope posts. If one completion of an operation throws, or stops the
/// io_context, the ones after it are posted again (so none is lost). Open one only around
/// code of the library's own: a handler that waited, inside it, for a completion it
/// deferred would wait for ever.
class coalescing_scope {
 public:
  coalescing_scope() noexcept;
  ~coalescing_scope();
  coalescing_scope(const coalescing_scope&) = delete;
  coalescing_scope& operator=(const coalescing_scope&) = delete;
};

}  // namespace sluice::detail
