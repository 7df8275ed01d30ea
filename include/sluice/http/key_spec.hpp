#pragma once
/// Key specs: which facts of a request identify the caller for one rule.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <sluice/http/client_ip.hpp>
#include <sluice/http/request.hpp>

namespace sluice::http {

/// One fact a key is made of.
struct key_part {
  enum class kind {
    ip,      ///< the client (see derive_client), grouped by prefix
    header,  ///< a request header's value (present and not empty)
    method,  ///< the request method
    host,    ///< the host, lower-cased
    path,    ///< the path without the query
  };
  kind what = kind::ip;
  std::string header_name;  ///< for kind::header: the name as written in the spec

  friend bool operator==(const key_part&, const key_part&) = default;
};

/// A parsed key spec. Grammar (spaces around `+` and `|` are allowed):
///
///     spec        = alternative *( "|" alternative )
///     alternative = part *( "+" part )
///     part        = "ip" | "method" | "host" | "path" | "header:" NAME
///
/// e.g. `ip`, `header:X-API-Key`, `ip+path`, `header:X-User-Id|header:X-API-Key|ip`.
/// Alternatives are tried left to right and the first one whose parts are all present
/// gives the key (`|` picks the strongest identity at hand). A `header:` part is absent
/// when the header is missing or empty; `ip` is absent only when the request has no peer.
/// When no alternative is complete the spec yields no key and the rule is skipped for that
/// request (reported in the evaluation, never a shared empty key): end the chain with
/// `|ip` to limit such requests too.
class key_spec {
 public:
  /// The spec `ip`.
  key_spec();

  /// Parses `text`. On failure returns std::nullopt and, when `why` is given, a one-line
  /// reason, e.g. `key "header:" : header name is empty`.
  static std::optional<key_spec> parse(std::string_view text, std::string* why = nullptr);

  /// The key for `req`, or std::nullopt when no alternative is complete. Parts are tagged
  /// and escaped (`ip=192.0.2.7`, `h:x-api-key=abc`, joined by `|`; `%`, `|`, `#` and control
  /// bytes in values are %-escaped) so that different facts never yield the same key;
  /// a value longer than 128 bytes is replaced by `#` and a 128-bit hash of it.
  std::optional<std::string> derive(const request_facts& req, const key_options& opts) const;

  /// The spec in canonical spelling (parse(to_string()) gives an equal spec).
  std::string to_string() const;

  /// The alternatives, each a list of parts.
  const std::vector<std::vector<key_part>>& alternatives() const noexcept { return alts_; }

  friend bool operator==(const key_spec&, const key_spec&) = default;

 private:
  std::vector<std::vector<key_part>> alts_;
};

}  // namespace sluice::http
