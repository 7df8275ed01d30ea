#include <sluice/http/client_ip.hpp>

#include <algorithm>

#include "http/text.hpp"

namespace sluice::http {
namespace {

// One hop as written in a forwarding header, before it is parsed as an address.
using hop_list = std::vector<std::string>;

// `X-Forwarded-For: a, b, c` -> {a, b, c}; empty entries are kept (they are malformed).
hop_list split_x_forwarded_for(std::string_view v) {
  hop_list hops;
  std::size_t start = 0;
  while (true) {
    const auto comma = v.find(',', start);
    hops.emplace_back(detail::trim(v.substr(start, comma - start)));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return hops;
}

// Splits `v` at `sep` outside quoted strings. Returns false for an unterminated quote.
bool split_outside_quotes(std::string_view v, char sep, std::vector<std::string_view>& out) {
  bool quoted = false;
  std::size_t start = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const char c = v[i];
    if (quoted) {
      if (c == '\\') {
        ++i;  // skip the escaped character
      } else if (c == '"') {
        quoted = false;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == sep) {
      out.push_back(v.substr(start, i - start));
      start = i + 1;
    }
  }
  if (quoted) return false;
  out.push_back(v.substr(start));
  return true;
}

// An RFC 7239 value: a token or a quoted-string (unescaped). std::nullopt when malformed.
std::optional<std::string> forwarded_value(std::string_view v) {
  v = detail::trim(v);
  if (v.empty() || v.front() != '"') return std::string(v);
  if (v.size() < 2 || v.back() != '"') return std::nullopt;
  std::string out;
  for (std::size_t i = 1; i + 1 < v.size(); ++i) {
    if (v[i] == '\\') {
      if (i + 2 >= v.size()) return std::nullopt;
      ++i;
    }
    out += v[i];
  }
  return out;
}

// `Forwarded: for=a;proto=https, for="[2001:db8::1]:80"` -> the `for` of each element.
// An element without a usable `for` becomes an empty hop (malformed, stops the walk).
hop_list split_forwarded(std::string_view v) {
  hop_list hops;
  std::vector<std::string_view> elements;
  if (!split_outside_quotes(v, ',', elements)) return {std::string()};
  for (auto element : elements) {
    std::string hop;
    std::vector<std::string_view> pairs;
    if (split_outside_quotes(element, ';', pairs)) {
      for (auto pair : pairs) {
        const auto eq = pair.find('=');
        if (eq == std::string_view::npos) continue;
        if (!detail::iequals(detail::trim(pair.substr(0, eq)), "for")) continue;
        if (auto value = forwarded_value(pair.substr(eq + 1))) hop = std::move(*value);
        break;
      }
    }
    hops.push_back(std::move(hop));
  }
  return hops;
}

// RFC 7239 §6.3: obfuscated identifiers are `_` followed by ALPHA / DIGIT / "." / "_" / "-".
bool is_obfuscated(std::string_view s) noexcept {
  if (s.size() < 2 || s.front() != '_') return false;
  return std::all_of(s.begin() + 1, s.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '.' ||
           c == '_' || c == '-';
  });
}

client_identity identity_of(const ip_address& a, const key_options& opts) {
  client_identity id;
  id.address = a;
  const unsigned width = a.v4 ? 32 : 128;
  const unsigned prefix = std::min(a.v4 ? opts.ipv4_prefix : opts.ipv6_prefix, width);
  if (prefix >= width || prefix == 0) {
    id.key = to_string(a);
  } else {
    id.key = to_string(mask(a, prefix)) + "/" + std::to_string(prefix);
  }
  return id;
}

}  // namespace

std::optional<forwarded_header> parse_forwarded_header(std::string_view s) noexcept {
  std::string t = detail::to_lower(detail::trim(s));
  std::replace(t.begin(), t.end(), '_', '-');
  if (t == "x-forwarded-for") return forwarded_header::x_forwarded_for;
  if (t == "forwarded") return forwarded_header::forwarded;
  if (t == "forwarded-then-x-forwarded-for")
    return forwarded_header::forwarded_then_x_forwarded_for;
  return std::nullopt;
}

std::string_view to_string(forwarded_header h) noexcept {
  switch (h) {
    case forwarded_header::x_forwarded_for:
      return "x-forwarded-for";
    case forwarded_header::forwarded:
      return "forwarded";
    case forwarded_header::forwarded_then_x_forwarded_for:
      return "forwarded-then-x-forwarded-for";
  }
  return "unknown";
}

bool is_trusted(const ip_address& a, const key_options& opts) noexcept {
  return std::any_of(opts.trusted_proxies.begin(), opts.trusted_proxies.end(),
                     [&](const cidr& c) { return c.contains(a); });
}

client_identity derive_client(const request_facts& req, const key_options& opts) {
  const auto peer = parse_ip(req.peer);
  if (!peer) {
    // Not an address (a Unix socket path, a test double): the text is still an identity.
    client_identity id;
    id.key = std::string(detail::trim(req.peer));
    return id;
  }
  const auto peer_identity = identity_of(*peer, opts);
  if (!req.headers || !is_trusted(*peer, opts)) return peer_identity;

  hop_list hops;
  bool have_header = false;
  if (opts.header != forwarded_header::x_forwarded_for) {
    if (auto v = req.headers("Forwarded"); v && !detail::trim(*v).empty()) {
      hops = split_forwarded(*v);
      have_header = true;
    }
  }
  if (!have_header && opts.header != forwarded_header::forwarded) {
    if (auto v = req.headers("X-Forwarded-For"); v && !detail::trim(*v).empty()) {
      hops = split_x_forwarded_for(*v);
      have_header = true;
    }
  }
  if (!have_header) return peer_identity;

  // Right to left: each hop was written by the (trusted) hop to its right.
  std::optional<ip_address> leftmost;
  for (auto it = hops.rbegin(); it != hops.rend(); ++it) {
    const auto addr = parse_ip(*it);
    if (!addr) {
      if (is_obfuscated(*it)) {
        client_identity id;
        id.key = *it;
        return id;
      }
      return peer_identity;  // `unknown`, empty or malformed: nothing to believe
    }
    if (!is_trusted(*addr, opts)) return identity_of(*addr, opts);
    leftmost = addr;
  }
  return leftmost ? identity_of(*leftmost, opts) : peer_identity;
}

}  // namespace sluice::http
