#include "redis/cluster/redirect.hpp"

#include <charconv>

namespace sluice::redis::cluster {
namespace {

template <class Int>
bool parse_uint(std::string_view s, Int& out, unsigned long max) noexcept {
  unsigned long v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc{} || p != s.data() + s.size() || v > max) return false;
  out = static_cast<Int>(v);
  return true;
}

}  // namespace

std::optional<redirect> parse_redirect(std::string_view text) {
  redirect r;
  if (text.starts_with("MOVED ")) {
    r.type = redirect::kind::moved;
    text.remove_prefix(6);
  } else if (text.starts_with("ASK ")) {
    r.type = redirect::kind::ask;
    text.remove_prefix(4);
  } else {
    return std::nullopt;
  }
  const auto space = text.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  if (!parse_uint(text.substr(0, space), r.slot, slot_count - 1)) return std::nullopt;
  const std::string_view endpoint = text.substr(space + 1);
  // The last ':' separates the port, so an IPv6 host ("::1:7000") keeps its colons.
  const auto colon = endpoint.rfind(':');
  if (colon == std::string_view::npos) return std::nullopt;
  std::string_view host = endpoint.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (!parse_uint(endpoint.substr(colon + 1), r.target.port, 65535) || r.target.port == 0)
    return std::nullopt;
  r.target.host = std::string(host);
  return r;
}

}  // namespace sluice::redis::cluster
