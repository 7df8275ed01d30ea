#include <sluice/http/address.hpp>

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

#include "http/text.hpp"

namespace sluice::http {
namespace {

// inet_pton needs a NUL-terminated string; addresses are short, so anything longer than
// the buffer is not an address.
constexpr std::size_t max_text = 64;

std::optional<ip_address> pton4(std::string_view s) noexcept {
  if (s.empty() || s.size() >= max_text || s.find('\0') != std::string_view::npos) {
    return std::nullopt;
  }
  char buf[max_text];
  std::memcpy(buf, s.data(), s.size());
  buf[s.size()] = '\0';
  ip_address a;
  a.v4 = true;
  if (inet_pton(AF_INET, buf, a.bytes.data()) != 1) return std::nullopt;
  return a;
}

// An IPv6 address without brackets; a zone (`%eth0`) is dropped. IPv4-mapped addresses
// come back as IPv4.
std::optional<ip_address> pton6(std::string_view s) noexcept {
  if (auto pct = s.find('%'); pct != std::string_view::npos) {
    if (pct + 1 == s.size()) return std::nullopt;  // an empty zone is malformed
    s = s.substr(0, pct);
  }
  if (s.empty() || s.size() >= max_text || s.find('\0') != std::string_view::npos) {
    return std::nullopt;
  }
  char buf[max_text];
  std::memcpy(buf, s.data(), s.size());
  buf[s.size()] = '\0';
  ip_address a;
  a.v4 = false;
  if (inet_pton(AF_INET6, buf, a.bytes.data()) != 1) return std::nullopt;
  static constexpr std::uint8_t mapped_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (std::equal(std::begin(mapped_prefix), std::end(mapped_prefix), a.bytes.begin())) {
    ip_address v4;
    v4.v4 = true;
    std::copy(a.bytes.begin() + 12, a.bytes.end(), v4.bytes.begin());
    return v4;
  }
  return a;
}

bool is_port(std::string_view s) noexcept {
  if (s.empty() || s.size() > 5) return false;
  unsigned v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + unsigned(c - '0');
  }
  return v <= 65535;
}

}  // namespace

std::optional<ip_address> parse_ip(std::string_view text) noexcept {
  text = detail::trim(text);
  // inet_pton would stop at an embedded NUL and accept the prefix before it.
  if (text.empty() || text.find('\0') != std::string_view::npos) return std::nullopt;
  if (text.front() == '[') {
    const auto close = text.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    const auto rest = text.substr(close + 1);
    if (!rest.empty() && !(rest.front() == ':' && is_port(rest.substr(1)))) return std::nullopt;
    return pton6(text.substr(1, close - 1));
  }
  const auto colons = std::count(text.begin(), text.end(), ':');
  if (colons == 0) return pton4(text);
  if (colons == 1) {
    // IPv4 with a port, as some proxies write it.
    const auto colon = text.find(':');
    if (!is_port(text.substr(colon + 1))) return std::nullopt;
    return pton4(text.substr(0, colon));
  }
  return pton6(text);
}

std::string to_string(const ip_address& a) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (!inet_ntop(a.v4 ? AF_INET : AF_INET6, a.bytes.data(), buf, sizeof buf)) return {};
  return buf;
}

ip_address mask(const ip_address& a, unsigned prefix_bits) noexcept {
  const unsigned width = a.v4 ? 32 : 128;
  prefix_bits = std::min(prefix_bits, width);
  ip_address out = a;
  for (unsigned byte = 0; byte < width / 8; ++byte) {
    const unsigned first_bit = byte * 8;
    if (first_bit >= prefix_bits) {
      out.bytes[byte] = 0;
    } else if (prefix_bits - first_bit < 8) {
      const unsigned keep = prefix_bits - first_bit;
      out.bytes[byte] &= std::uint8_t(0xff << (8 - keep));
    }
  }
  return out;
}

bool cidr::contains(const ip_address& a) const noexcept {
  return a.v4 == network.v4 && mask(a, prefix) == network;
}

std::optional<cidr> parse_cidr(std::string_view text, std::string* why) {
  const auto fail = [&](std::string_view reason) -> std::optional<cidr> {
    if (why) *why = "\"" + std::string(text) + "\": " + std::string(reason);
    return std::nullopt;
  };
  const auto t = detail::trim(text);
  if (t.empty()) return fail("empty CIDR (want e.g. 10.0.0.0/8 or 2001:db8::/32)");
  const auto slash = t.find('/');
  const auto addr_text = t.substr(0, slash);
  // Only plain addresses here: a port or brackets in a CIDR is a mistake worth reporting.
  const bool looks_v6 = addr_text.find(':') != std::string_view::npos;
  if (addr_text.find_first_of("[]%") != std::string_view::npos) {
    return fail("not an IP address (write the address without brackets, port or zone)");
  }
  std::optional<ip_address> addr = looks_v6 ? pton6(addr_text) : pton4(addr_text);
  if (!addr) return fail("not an IPv4 or IPv6 address");
  unsigned width = addr->v4 ? 32 : 128;
  unsigned prefix = width;
  if (slash != std::string_view::npos) {
    const auto p = t.substr(slash + 1);
    if (p.empty() || p.size() > 3 ||
        !std::all_of(p.begin(), p.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return fail(addr->v4 ? "prefix must be a number 0..32 for IPv4"
                           : "prefix must be a number 0..128 for IPv6");
    }
    prefix = unsigned(std::stoul(std::string(p)));
    // An IPv4-mapped IPv6 range (::ffff:10.0.0.0/104) means the IPv4 range /8.
    if (looks_v6 && addr->v4) {
      if (prefix < 96) return fail("an IPv4-mapped IPv6 range needs a prefix of 96..128");
      prefix -= 96;
      width = 32;
    }
    if (prefix > width) {
      return fail(addr->v4 ? "prefix must be 0..32 for IPv4" : "prefix must be 0..128 for IPv6");
    }
  }
  cidr c{mask(*addr, prefix), prefix};
  if (!(c.network == *addr)) {
    return fail("host bits are set below the prefix (did you mean " + to_string(c) + "?)");
  }
  return c;
}

std::string to_string(const cidr& c) {
  return to_string(c.network) + "/" + std::to_string(c.prefix);
}

}  // namespace sluice::http
