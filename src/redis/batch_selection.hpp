#pragma once
// Which waiting requests leave together in the next script call of a connection's queue
// (decision_batcher.hpp), without any I/O, lock or clock, so unit tests drive it with plain
// values (tests/unit/redis_batch_selection_test.cpp).
//
// The oldest request always leaves. An opaque call (one that cannot share its call) leaves
// alone. A batchable request (a decision, or a slot step: each kind has its own script, so
// kinds never share a call) takes with it, up to `max_batch` in all, the requests of its kind
// after it that may share its call: any (standalone), or those on its hash slot among the
// next `slot_search` (Redis Cluster: a script's keys must share one slot; with keys spread
// over 16384 slots a longer search finds nothing more). Nothing is taken from past an opaque
// call, so it keeps its place before what came after it; what is passed over keeps its
// order, so requests of one kind (and one key) leave in the order they came.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

namespace sluice::redis {

inline constexpr std::size_t slot_search = 256;

/// Moves the next call's requests from the front of `waiting` (not empty) to the result.
/// `T` offers `bool opaque(const T&)`, `std::uint16_t slot_of(const T&)` and an integer
/// `kind_of(const T&)` as callables.
template <class T, class Opaque, class SlotOf, class KindOf>
std::vector<T> take_batch(std::deque<T>& waiting, std::size_t max_batch, bool by_slot,
                          Opaque opaque, SlotOf slot_of, KindOf kind_of) {
  std::vector<T> b;
  const bool alone = opaque(waiting.front());
  b.push_back(std::move(waiting.front()));
  waiting.pop_front();
  if (alone) return b;
  // Nothing is taken from past an opaque call.
  std::size_t end = 0;
  const std::size_t look = by_slot ? std::min(waiting.size(), slot_search) : waiting.size();
  while (end < look && !opaque(waiting[end])) ++end;
  const auto kind = kind_of(b.front());
  const std::uint16_t slot = by_slot ? slot_of(b.front()) : 0;
  const auto joins = [&](const T& t) {
    return kind_of(t) == kind && (!by_slot || slot_of(t) == slot);
  };
  // Past the full batch everything stays where it is: the scan stops there, and after
  // `slot_search` requests passed over (of the other kind, standalone).
  std::size_t kept = 0;
  std::size_t i = 0;
  for (; i < end && b.size() < max_batch && kept < slot_search; ++i) {
    if (joins(waiting[i])) {
      b.push_back(std::move(waiting[i]));
    } else {
      if (kept != i) waiting[kept] = std::move(waiting[i]);
      ++kept;
    }
  }
  waiting.erase(waiting.begin() + static_cast<std::ptrdiff_t>(kept),
                waiting.begin() + static_cast<std::ptrdiff_t>(i));
  return b;
}

/// The same, with every batchable request of one kind.
template <class T, class Opaque, class SlotOf>
std::vector<T> take_batch(std::deque<T>& waiting, std::size_t max_batch, bool by_slot,
                          Opaque opaque, SlotOf slot_of) {
  return take_batch(waiting, max_batch, by_slot, opaque, slot_of, [](const T&) { return 0; });
}

}  // namespace sluice::redis
