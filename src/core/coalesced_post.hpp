#pragma once
// The backends' side of sluice/completion.hpp (private): a backend that completes many
// operations at once opens a coalescing_scope around them, so that the completions
// sluice::post_completion() makes for one io_context are posted to it as one operation.
#include <sluice/completion.hpp>

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
