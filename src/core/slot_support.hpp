#pragma once
// What the limiter's concurrency limits (limiter_slots.cpp) and sluice::slot (slot.cpp)
// share, private: the counters behind limiter::slot_stats(), slot ids, and one slot step
// waited for.
#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <system_error>

#include <sluice/backend.hpp>

#include "core/burst_log.hpp"
#include "core/slot_wait.hpp"

namespace sluice::detail {

/// A limiter's concurrency counters (sluice::slot_stats), shared by its copies and by the
/// slots it handed out (a slot counts its release and renewals after the limiter is gone).
struct slot_counters {
  std::atomic<std::uint64_t> acquired{0}, refused{0}, released{0}, renewed{0}, renew_failures{0},
      invalid{0}, degraded_open{0}, degraded_closed{0}, degraded_local{0}, backend_errors{0};
  burst_log log{"sluice backend (concurrency limits)"};
  /// The limiter's waiters (limiter::async_acquire): here, so that a release finds them.
  slot_waitlist waitlist;

  static void add(std::atomic<std::uint64_t>& c) noexcept {
    c.fetch_add(1, std::memory_order_relaxed);
  }
  /// A step the backend failed (`ec`): counted and logged once per burst.
  void failed(std::error_code ec) noexcept {
    add(backend_errors);
    log.failure(ec);
  }
};

/// A new slot id: 32 lowercase hex digits of 128 bits from the library's CSPRNG
/// (random_bytes.hpp), drawn in blocks per thread; a forked child draws afresh, so
/// parent and child never hand out the same ids. Thread-safe. Throws std::system_error if
/// the generator cannot be seeded.
std::string new_slot_id();
/// new_slot_id() into `hex`, with no allocation (an acquire copies it into its completion).
void new_slot_id(std::array<char, 32>& hex);

/// Starts one slot step (`start` hands it the handler) and waits for its answer: what the
/// backend answered, or its error. Must not be called from a thread that the backend's I/O
/// runs on (the answer would wait for this thread).
std::error_code await_slot_reply(const std::function<void(slot_handler)>& start, slot_reply& out);
/// One step on `b`, waited for (await_slot_reply).
std::error_code slot_step_blocking(backend& b, std::string_view key, const slot_request& request,
                                   slot_reply& out);

}  // namespace sluice::detail
