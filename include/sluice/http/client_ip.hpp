#pragma once
/// Who the client is: the direct peer, or, when the peer is a trusted proxy, the address
/// the proxies recorded in `X-Forwarded-For` or `Forwarded` (RFC 7239).
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <sluice/http/address.hpp>
#include <sluice/http/request.hpp>

namespace sluice::http {

/// Which forwarding header a trusted proxy writes. Only one is read: a header the proxy
/// does not maintain is passed through from the client unchanged and must not be believed.
enum class forwarded_header {
  x_forwarded_for,  ///< `X-Forwarded-For: client, proxy1, proxy2` (nginx, Traefik, Envoy)
  forwarded,        ///< RFC 7239 `Forwarded: for=client, for="[2001:db8::1]:443"`
  /// `Forwarded` when the request has it, else `X-Forwarded-For`. Only safe when every
  /// trusted proxy overwrites or appends to both headers.
  forwarded_then_x_forwarded_for,
};

/// Parses `x-forwarded-for`, `forwarded` or `forwarded-then-x-forwarded-for`
/// (underscores are accepted too).
std::optional<forwarded_header> parse_forwarded_header(std::string_view s) noexcept;
std::string_view to_string(forwarded_header h) noexcept;

/// How client addresses are derived and grouped into `ip` keys.
struct key_options {
  /// Peers (and forwarding hops) whose forwarding headers are believed.
  std::vector<cidr> trusted_proxies;
  forwarded_header header = forwarded_header::x_forwarded_for;
  /// IPv6 clients are limited per network of this size: one host usually owns a whole /64.
  unsigned ipv6_prefix = 64;  ///< 1..128
  unsigned ipv4_prefix = 32;  ///< 1..32
};

/// True when `a` is in any of `opts.trusted_proxies`.
bool is_trusted(const ip_address& a, const key_options& opts) noexcept;

/// What client_identity() found.
struct client_identity {
  /// The client's address, when it is an address (not grouped by prefix).
  std::optional<ip_address> address;
  /// The text used in keys: the address grouped by the prefix (`192.0.2.7`,
  /// `2001:db8:1:2::/64`), or a trusted proxy's obfuscated identifier (`_hidden`, RFC 7239
  /// §6.3), or the peer text verbatim when it is not an address. Empty only when the
  /// request has no peer at all.
  std::string key;
};

/// Derives the client. Forwarding headers are read only when the direct peer is trusted;
/// the hops are then walked right to left, skipping trusted ones, and the first untrusted
/// hop is the client. If every hop is trusted, the leftmost one is the client. An entry
/// that is malformed or `unknown` stops the walk and the direct peer is used instead; an
/// obfuscated identifier (`_abc`) written by a trusted proxy is used as the identity.
/// Never throws for any input.
client_identity derive_client(const request_facts& req, const key_options& opts);

}  // namespace sluice::http
