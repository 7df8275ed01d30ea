#pragma once
/// sluice::limiter: validates a request, asks its backend, and applies the policy's
/// failure mode when the backend fails.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/system_executor.hpp>

#include <sluice/backend.hpp>
#include <sluice/clock.hpp>
#include <sluice/decision.hpp>
#include <sluice/policy.hpp>

namespace sluice {

/// Counts of what a limiter did, for metrics. Monotonic; read with limiter::stats().
struct limiter_stats {
  std::uint64_t allowed = 0;
  std::uint64_t denied = 0;
  std::uint64_t invalid = 0;
  std::uint64_t degraded_open = 0;
  std::uint64_t degraded_closed = 0;
  std::uint64_t degraded_local = 0;
  std::uint64_t backend_errors = 0;
  std::uint64_t cached_denials = 0;  ///< denied in-process (policy::cache_denials), no round trip
};

class limiter {
 public:
  /// `primary` decides; `fallback` (a memory backend, created when null) serves the
  /// `local` failure mode; `time_source` (default: steady_clock) times the cache of denials.
  explicit limiter(std::shared_ptr<backend> primary, std::shared_ptr<backend> fallback = nullptr,
                   std::shared_ptr<const clock> time_source = nullptr);

  /// A limiter on a fresh memory backend.
  static limiter in_memory();
  /// "memory", or a redis://, redis+cluster:// or redis+sentinel:// URL or its TLS form
  /// (rediss://, rediss+cluster://, rediss+sentinel://), with default redis_options
  /// otherwise. Throws std::invalid_argument for anything else (or TLS files that cannot
  /// be loaded).
  static limiter from_url(std::string_view url);

  /// Blocking check. Never throws: `ec` is set only for invalid input (sluice::errc);
  /// backend trouble yields the failure mode's degraded decision. Thread-safe.
  decision check(std::string_view key, const policy& p, std::uint64_t cost,
                 std::error_code& ec) noexcept;
  /// Blocking check that throws std::system_error for invalid input.
  decision check(std::string_view key, const policy& p, std::uint64_t cost = 1);

  /// Asynchronous check. Completion signature: `void(std::error_code, sluice::decision)`,
  /// with the error set only for invalid input. The handler never runs inline: it is
  /// posted to its associated executor (default: boost::asio::system_executor).
  /// Works with callbacks, `use_awaitable`, `use_future` and other completion tokens; as
  /// std::error_code is not Asio's error type, those yield `std::tuple<std::error_code,
  /// decision>` rather than throwing.
  template <class CompletionToken>
  auto async_check(std::string_view key, const policy& p, std::uint64_t cost,
                   CompletionToken&& token) {
    return boost::asio::async_initiate<CompletionToken, void(std::error_code, decision)>(
        [this](auto handler, std::string k, policy pol, std::uint64_t c) {
          auto ex = boost::asio::get_associated_executor(handler, boost::asio::system_executor());
          auto work = boost::asio::make_work_guard(ex);
          auto shared = std::make_shared<decltype(handler)>(std::move(handler));
          start_check(k, pol, c, [shared, work](std::error_code ec, decision d) mutable {
            auto ex2 = work.get_executor();
            boost::asio::post(ex2, [shared, ec, d]() mutable { (*shared)(ec, d); });
            work.reset();
          });
        },
        token, std::string(key), p, cost);
  }

  limiter_stats stats() const noexcept;

 private:
  struct state;
  void start_check(std::string_view key, const policy& p, std::uint64_t cost, decide_handler done);
  std::shared_ptr<state> state_;
};

}  // namespace sluice
