#pragma once
// Concurrency limits (issue 34) as pure steps: at most `limit` holders of one key at once,
// each holding its slot for a lease that ends unless it is renewed, so a holder that dies
// frees its slot when the lease ends. Every step first forgets the holders whose lease has
// ended (at or before now). Nothing here reads a clock or does I/O: the memory backend runs
// these; lua/slots.lua is the same steps on a Redis sorted set (member: the slot id, score:
// when its lease ends, in ms), checked against these on random histories.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::detail {

/// A slot's id: 128 random bits, unguessable, so that one holder cannot release or renew
/// another's slot. On the wire: 32 lowercase hex digits.
struct slot_id {
  std::uint64_t hi = 0;
  std::uint64_t lo = 0;
  friend bool operator==(const slot_id&, const slot_id&) = default;
};

std::string to_hex(const slot_id& id);
/// Exactly 32 hex digits (either case); std::nullopt otherwise.
std::optional<slot_id> parse_slot_id(std::string_view hex) noexcept;

struct slot_holder {
  slot_id id;
  std::int64_t ends_ms = 0;  ///< when its lease ends
  friend bool operator==(const slot_holder&, const slot_holder&) = default;
};

/// One key's holders, in no particular order (a limit is small: a scan beats a tree).
struct slot_table {
  std::vector<slot_holder> holders;
};

struct slot_outcome {
  bool held = false;                ///< acquired, renewed, or released (it was held)
  std::int64_t in_flight = 0;       ///< holders after the step
  std::int64_t retry_after_ms = 0;  ///< an acquire refused: until the first lease ends
  std::int64_t expires_in_ms = 0;   ///< acquired or renewed: the lease, ttl_ms
};

/// Admits `id` for ttl_ms when fewer than `limit` hold the key; a lowered limit takes
/// effect as slots free (holders above it keep their slots). An id that holds already is
/// renewed instead (a retried acquire does not take two slots).
slot_outcome slots_acquire(slot_table& t, const slot_id& id, std::int64_t limit,
                           std::int64_t ttl_ms, std::int64_t now_ms);
/// Frees `id`'s slot; an id that does not hold (expired, unknown, released) changes nothing.
slot_outcome slots_release(slot_table& t, const slot_id& id, std::int64_t now_ms);
/// Extends a live holder's lease to now + ttl_ms; held == false when it had ended (and the
/// slot may have been taken since).
slot_outcome slots_renew(slot_table& t, const slot_id& id, std::int64_t ttl_ms,
                         std::int64_t now_ms);

}  // namespace sluice::detail
