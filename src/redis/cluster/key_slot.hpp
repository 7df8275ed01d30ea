#pragma once
// Redis Cluster key slots (the cluster specification's "Keys distribution model"): the
// CRC16 (XMODEM) of the key, or of its {hash tag}, modulo 16384. Pure functions.
#include <cstdint>
#include <string_view>

namespace sluice::redis::cluster {

inline constexpr std::uint16_t slot_count = 16384;

/// CRC16-CCITT (XMODEM): polynomial 0x1021, initial value 0, no reflection.
std::uint16_t crc16(std::string_view data) noexcept;

/// The part of `key` that is hashed: the text between the first '{' and the next '}' when
/// that is non-empty, else the whole key. Keys sharing a tag share a slot.
std::string_view hash_tag(std::string_view key) noexcept;

/// The slot (0..16383) that serves `key`.
std::uint16_t key_slot(std::string_view key) noexcept;

}  // namespace sluice::redis::cluster
