#include "algorithm/slots.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
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

constexpr int hex_digit(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string to_hex(const slot_id& id) {
  char out[33];
  std::snprintf(out, sizeof out, "%016llx%016llx", static_cast<unsigned long long>(id.hi),
                static_cast<unsigned long long>(id.lo));
  return std::string(out, 32);
}

std::optional<slot_id> parse_slot_id(std::string_view hex) noexcept {
  // On every step of the memory backend: a table and one validity check per half, instead
  // of a branch per digit.
  static constexpr auto values = [] {
    std::array<std::uint8_t, 256> v{};
    v.fill(0xff);
    for (int c = 0; c < 256; ++c) {
      const int d = hex_digit(static_cast<char>(c));
      if (d >= 0) v[static_cast<std::size_t>(c)] = static_cast<std::uint8_t>(d);
    }
    return v;
  }();
  if (hex.size() != 32) return std::nullopt;
  std::uint64_t half[2] = {0, 0};
  std::uint8_t invalid = 0;
  for (std::size_t h = 0; h < 2; ++h) {
    for (std::size_t i = 0; i < 16; ++i) {
      const auto d = values[static_cast<unsigned char>(hex[h * 16 + i])];
      invalid |= d & 0xf0;
      half[h] = (half[h] << 4) | (d & 0x0f);
    }
  }
  if (invalid != 0) return std::nullopt;
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
