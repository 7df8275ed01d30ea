#pragma once
// Which waiting requests leave together in the next script call of a connection's queue
// (decision_batcher.hpp), without any I/O, lock or clock, so unit tests drive it with plain
// values (tests/unit/redis_batch_selection_test.cpp).
//
// The oldest request always leaves. An opaque call (one that cannot share its call) leaves
// alone. A decision takes with it, up to `max_batch` in all, the decisions after it that may
// share its call: any (standalone), or those on its hash slot among the next
// `slot_search` (Redis Cluster: a script's keys must share one slot; with keys spread over
// 16384 slots a longer search finds nothing more). Nothing is taken from past an opaque
// call, so it keeps its place before what came after it; what is passed over keeps its
// order.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

namespace sluice::redis {

inline constexpr std::size_t slot_search = 256;

/// Moves the next call's requests from the front of `waiting` (not empty) to the result.
/// `T` offers `bool opaque(const T&)` and `std::uint16_t slot_of(const T&)` as callables.
template <class T, class Opaque, class SlotOf>
std::vector<T> take_batch(std::deque<T>& waiting, std::size_t max_batch, bool by_slot,
                          Opaque opaque, SlotOf slot_of) {
  std::vector<T> b;
  const bool alone = opaque(waiting.front());
  b.push_back(std::move(waiting.front()));
  waiting.pop_front();
  if (alone) return b;
  // Nothing is taken from past an opaque call.
  std::size_t end = 0;
  const std::size_t look = by_slot ? std::min(waiting.size(), slot_search) : waiting.size();
  while (end < look && !opaque(waiting[end])) ++end;
  if (!by_slot) {
    const std::size_t n = std::min(end, max_batch - 1);
    b.reserve(n + 1);
    for (std::size_t i = 0; i < n; ++i) {
      b.push_back(std::move(waiting.front()));
      waiting.pop_front();
    }
    return b;
  }
  const std::uint16_t slot = slot_of(b.front());
  std::size_t kept = 0;
  for (std::size_t i = 0; i < end; ++i) {
    if (b.size() < max_batch && slot_of(waiting[i]) == slot) {
      b.push_back(std::move(waiting[i]));
    } else {
      if (kept != i) waiting[kept] = std::move(waiting[i]);
      ++kept;
    }
  }
  waiting.erase(waiting.begin() + static_cast<std::ptrdiff_t>(kept),
                waiting.begin() + static_cast<std::ptrdiff_t>(end));
  return b;
}

}  // namespace sluice::redis
