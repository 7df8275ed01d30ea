#pragma once
// The query part of Redis URLs (`?name=value&...`), shared by parse_redis_url and the
// cluster / sentinel parsers so that every URL kind spells TLS options the same way.
#include <sluice/redis_backend.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace sluice::redis {

/// One `name=value` of a query, the value percent-decoded.
struct query_option {
  std::string name;
  std::string value;
};

/// Decodes %XX escapes; false for a stray or malformed '%'.
bool percent_decode(std::string_view in, std::string& out);

/// Splits `a=1&b=2` (without the '?'); refuses a pair without '=', an empty name or value,
/// bad percent-encoding and a name given twice. An empty query yields no options.
bool parse_query(std::string_view query, std::vector<query_option>& out, std::string* why);

enum class option_result : unsigned char { applied, unknown, invalid };

/// Applies one of the TLS options (ca, cert, key, sni, verify) to `tls`; `unknown` (why
/// untouched) when `o` is not one of them, `invalid` (why set) for a bad value.
option_result apply_tls_option(const query_option& o, redis_tls& tls, std::string* why);

/// The TLS options that apply_tls_option knows, for error messages.
inline constexpr std::string_view tls_option_names = "ca, cert, key, sni, verify";

/// Checks the options as a whole once all are applied: TLS options only with a rediss
/// scheme (`tls.enabled`), and cert= and key= together.
bool check_tls(const redis_tls& tls, bool had_tls_options, std::string_view tls_scheme,
               std::string* why);

}  // namespace sluice::redis
