#pragma once
// Small ASCII text helpers shared by the HTTP middleware sources.
#include <string>
#include <string_view>

namespace sluice::http::detail {

inline char lower(char c) noexcept { return (c >= 'A' && c <= 'Z') ? char(c - 'A' + 'a') : c; }

inline bool iequals(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

inline std::string to_lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = lower(c);
  return out;
}

// Trims optional whitespace (SP / HTAB, RFC 9110 OWS).
inline std::string_view trim(std::string_view s) noexcept {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The host without a port: `example.com:8080` -> `example.com`, `[::1]:80` -> `[::1]`.
// Rules match hosts, and keys group them, without the port: one site is one host.
inline std::string_view host_only(std::string_view host) noexcept {
  host = trim(host);
  if (!host.empty() && host.front() == '[') {
    const auto close = host.find(']');
    return close == std::string_view::npos ? host : host.substr(0, close + 1);
  }
  const auto colon = host.find(':');
  // More than one colon: a bare IPv6 address, which has no port.
  if (colon != std::string_view::npos && host.find(':', colon + 1) == std::string_view::npos) {
    return host.substr(0, colon);
  }
  return host;
}

// RFC 9110 tchar: the characters of a token (header names, methods).
inline bool is_tchar(char c) noexcept {
  if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return true;
  switch (c) {
    case '!':
    case '#':
    case '$':
    case '%':
    case '&':
    case '\'':
    case '*':
    case '+':
    case '-':
    case '.':
    case '^':
    case '_':
    case '`':
    case '|':
    case '~':
      return true;
    default:
      return false;
  }
}

inline bool is_token(std::string_view s) noexcept {
  if (s.empty()) return false;
  for (char c : s) {
    if (!is_tchar(c)) return false;
  }
  return true;
}

}  // namespace sluice::http::detail
