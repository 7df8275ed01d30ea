#include "algorithm/slots.hpp"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>
#include <limits>

namespace sluice::detail {
namespace {

void forget_ended(slot_table& t, std::int64_t now_ms) {
  std::erase_if(t.holders, [&](const slot_holder& h) { return h.ends_ms <= now_ms; });
}

slot_holder* find(slot_table& t, const slot_id& id) {
  const auto it = std::find_if(t.holders.begin(), t.holders.end(),
                               [&](const slot_holder& h) { return h.id == id; });
  return it == t.holders.end() ? nullptr : &*it;
}

std::int64_t count(const slot_table& t) { return static_cast<std::int64_t>(t.holders.size()); }

}  // namespace

std::string to_hex(const slot_id& id) {
  char out[33];
  std::snprintf(out, sizeof out, "%016llx%016llx", static_cast<unsigned long long>(id.hi),
                static_cast<unsigned long long>(id.lo));
  return std::string(out, 32);
}

namespace {

constexpr std::uint64_t bytes(std::uint8_t b) noexcept { return 0x0101010101010101ull * b; }

// 8 hex digits (either case) read as one little-endian word, 8 bits per digit (SWAR): their
// value, or nothing when one is not a hex digit. On every step of the memory backend (an
// acquire and a release parse an id each): a few word operations instead of a table lookup
// and a shift per digit. Adding to a byte below 0x80 never carries into the next one.
std::optional<std::uint32_t> parse8(std::uint64_t x) noexcept {
  const std::uint64_t high = bytes(0x80);
  if (x & high) return std::nullopt;  // not ASCII
  const std::uint64_t digit = ((x + bytes(0x80 - '0')) & ~(x + bytes(0x80 - '9' - 1))) & high;
  const std::uint64_t lower = x | bytes(0x20);  // 'A'..'F' as 'a'..'f'; no other byte lands there
  const std::uint64_t alpha =
      ((lower + bytes(0x80 - 'a')) & ~(lower + bytes(0x80 - 'f' - 1))) & high;
  if ((digit | alpha) != high) return std::nullopt;
  // '0'..'9' & 0xf is the value; 'a'..'f' & 0xf is 1..6, so 9 more.
  const std::uint64_t n = (x & bytes(0x0f)) + (alpha >> 7) * 9;
  // Byte i is digit i (the most significant first): pair them, then the four pairs.
  const std::uint64_t p = ((n << 4) | (n >> 8)) & 0x00ff00ff00ff00ffull;
  return static_cast<std::uint32_t>(((p & 0xff) << 24) | (((p >> 16) & 0xff) << 16) |
                                    (((p >> 32) & 0xff) << 8) | ((p >> 48) & 0xff));
}

}  // namespace

std::optional<slot_id> parse_slot_id(std::string_view hex) noexcept {
  static_assert(std::endian::native == std::endian::little, "parse8 reads words little-endian");
  if (hex.size() != 32) return std::nullopt;
  std::uint64_t half[2] = {0, 0};
  for (std::size_t q = 0; q < 4; ++q) {
    std::uint64_t x;
    std::memcpy(&x, hex.data() + q * 8, 8);
    const auto v = parse8(x);
    if (!v) return std::nullopt;
    half[q / 2] = (half[q / 2] << 32) | *v;
  }
  return slot_id{half[0], half[1]};
}

slot_outcome slots_acquire(slot_table& t, const slot_id& id, std::int64_t limit,
                           std::int64_t ttl_ms, std::int64_t now_ms) {
  forget_ended(t, now_ms);
  if (auto* h = find(t, id)) {
    h->ends_ms = now_ms + ttl_ms;
    return {true, count(t), 0, ttl_ms};
  }
  if (count(t) < limit) {
    t.holders.push_back({id, now_ms + ttl_ms});
    return {true, count(t), 0, ttl_ms};
  }
  std::int64_t first_end = std::numeric_limits<std::int64_t>::max();
  for (const auto& h : t.holders) first_end = std::min(first_end, h.ends_ms);
  // A limit lowered to 0 has no end to wait for: a lease's length is the best guess.
  const std::int64_t retry = t.holders.empty() ? ttl_ms : first_end - now_ms;
  return {false, count(t), retry, 0};
}

slot_outcome slots_release(slot_table& t, const slot_id& id, std::int64_t now_ms) {
  forget_ended(t, now_ms);
  const auto before = t.holders.size();
  std::erase_if(t.holders, [&](const slot_holder& h) { return h.id == id; });
  return {t.holders.size() != before, count(t), 0, 0};
}

slot_outcome slots_renew(slot_table& t, const slot_id& id, std::int64_t ttl_ms,
                         std::int64_t now_ms) {
  forget_ended(t, now_ms);
  auto* h = find(t, id);
  if (!h) return {false, count(t), 0, 0};
  h->ends_ms = now_ms + ttl_ms;
  return {true, count(t), 0, ttl_ms};
}

}  // namespace sluice::detail
