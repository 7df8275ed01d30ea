#include "core/coalesced_post.hpp"

#include <cstddef>
#include <iterator>
#include <utility>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>

namespace sluice::detail {
namespace asio = boost::asio;

namespace {

using completions = std::vector<std::function<void()>>;

struct group {
  asio::io_context* ctx;
  asio::executor_work_guard<asio::io_context::executor_type> work;  // until posted
  completions fns;
};

struct deferred_posts {
  int depth = 0;
  std::vector<group> groups;  // few: one per io_context that awaits completions
};

thread_local deferred_posts tls_deferred;

void run_all(asio::io_context& ctx, completions& fns);

// Posts the completions after the first `done` again, as one operation (none if none is left).
void post_rest(asio::io_context& ctx, completions& fns, std::size_t done) {
  if (done >= fns.size()) return;
  completions rest(std::make_move_iterator(fns.begin() + static_cast<std::ptrdiff_t>(done)),
                   std::make_move_iterator(fns.end()));
  asio::post(ctx, [&ctx, rest = std::move(rest)]() mutable { run_all(ctx, rest); });
}

// Runs the completions in order, each destroyed once it has run. Where Asio would stop
// running handlers, this stops too and posts the rest again, so that none is lost: when one
// throws (the exception then leaves run(), as a handler's does), and when one stops the
// io_context (the rest run after restart(), as queued handlers do).
void run_all(asio::io_context& ctx, completions& fns) {
  for (std::size_t i = 0; i < fns.size(); ++i) {
    try {
      auto fn = std::move(fns[i]);
      fn();
    } catch (...) {
      post_rest(ctx, fns, i + 1);
      throw;
    }
    if (ctx.stopped()) {
      post_rest(ctx, fns, i + 1);
      return;
    }
  }
}

}  // namespace

void post_coalesced(asio::io_context& ctx, std::function<void()> fn) {
  auto& d = tls_deferred;
  if (d.depth == 0) {
    asio::post(ctx, std::move(fn));
    return;
  }
  for (auto& g : d.groups) {
    if (g.ctx == &ctx) {
      g.fns.push_back(std::move(fn));
      return;
    }
  }
  d.groups.push_back({&ctx, asio::make_work_guard(ctx), {}});
  d.groups.back().fns.push_back(std::move(fn));
}

bool coalescing_open() noexcept { return tls_deferred.depth > 0; }

coalescing_scope::coalescing_scope() noexcept { ++tls_deferred.depth; }

coalescing_scope::~coalescing_scope() {
  auto& d = tls_deferred;
  if (--d.depth > 0) return;
  std::vector<group> groups;
  groups.swap(d.groups);
  for (auto& g : groups) {
    if (g.fns.size() == 1) {
      asio::post(*g.ctx, std::move(g.fns.front()));
    } else {
      asio::post(*g.ctx, [ctx = g.ctx, fns = std::move(g.fns)]() mutable { run_all(*ctx, fns); });
    }
  }
  // The work guards go with `groups`, after every post has returned: a caller whose run()
  // returns once its work runs out must not see it run out before the post is done.
}

}  // namespace sluice::detail

namespace sluice {

bool completions_grouped() noexcept { return detail::coalescing_open(); }

void post_grouped(boost::asio::io_context& ctx, std::function<void()> fn) {
  detail::post_coalesced(ctx, std::move(fn));
}

}  // namespace sluice
