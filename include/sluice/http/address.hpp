#pragma once
/// IP addresses and CIDR ranges as the HTTP middleware sees them: parsed leniently from
/// what proxies write (ports, brackets, IPv6 zone ids) and IPv4-mapped IPv6 folded to IPv4.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sluice::http {

/// An IPv4 or IPv6 address. IPv4 addresses (including IPv4-mapped IPv6 such as
/// `::ffff:192.0.2.1`) are stored as IPv4, so both spellings give the same key.
struct ip_address {
  bool v4 = true;
  /// Network byte order; an IPv4 address uses the first 4 bytes, the rest are zero.
  std::array<std::uint8_t, 16> bytes{};

  friend bool operator==(const ip_address&, const ip_address&) = default;
};

/// Parses an address as it appears in a peer endpoint, `X-Forwarded-For` or a `Forwarded`
/// `for=` value: `192.0.2.1`, `192.0.2.1:8080`, `2001:db8::1`, `[2001:db8::1]`,
/// `[2001:db8::1]:443`, `fe80::1%eth0` (the zone is dropped). Surrounding spaces are
/// ignored. std::nullopt for anything else (never throws).
std::optional<ip_address> parse_ip(std::string_view text) noexcept;

/// The canonical text: dotted quad for IPv4, RFC 5952 form (lower case, `::`) for IPv6.
std::string to_string(const ip_address& a);

/// `a` with every bit after the first `prefix_bits` cleared (prefix clamped to 32 or 128).
ip_address mask(const ip_address& a, unsigned prefix_bits) noexcept;

/// A CIDR range such as `10.0.0.0/8` or `2001:db8::/32`. A bare address is a /32 or /128.
struct cidr {
  ip_address network;    ///< already masked
  unsigned prefix = 32;  ///< 0..32 for IPv4, 0..128 for IPv6

  /// True when `a` is inside the range (an IPv4 range never contains an IPv6 address).
  bool contains(const ip_address& a) const noexcept;

  friend bool operator==(const cidr&, const cidr&) = default;
};

/// Parses `address[/prefix]`. Host bits set below the prefix (`10.1.2.3/8`) are an error,
/// since they usually mean a typo. On failure returns std::nullopt and, when `why` is
/// given, a one-line reason such as `"10.0.0.0/33": prefix must be 0..32 for IPv4`.
std::optional<cidr> parse_cidr(std::string_view text, std::string* why = nullptr);

/// `network/prefix` in canonical form.
std::string to_string(const cidr& c);

}  // namespace sluice::http
