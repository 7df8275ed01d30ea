#pragma once
// The admin endpoints' pieces that need no request or socket: the token file, the
// Authorization header, the constant-time comparison, and which key operation an endpoint
// is. The service (admin_endpoints.cpp) answers the requests.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include <sluice/backend.hpp>

namespace sluice::daemon {

/// The shortest admin token accepted, in bytes, and the largest token file read.
inline constexpr std::size_t min_admin_token_size = 16;
inline constexpr std::size_t max_admin_token_file_size = 4096;

/// The token in the file at `path`: its whole content without trailing CR and LF bytes,
/// which must be 16..4096 bytes of RFC 6750 b64token (`A-Z a-z 0-9 - . _ ~ + /`, then `=`
/// padding only at the end), so that it can be sent as `Authorization: Bearer <token>`.
/// Only a regular file is read (never a FIFO or a device, which could block or never end).
/// On failure returns std::nullopt and sets `why` (it never quotes the file's content).
std::optional<std::string> read_admin_token(const std::string& path, std::string& why);

/// RFC 6750 b64token (RFC 7235 token68): 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" /
/// "/" ) *"=".
bool is_token68(std::string_view s) noexcept;

/// What an Authorization field says, as far as Bearer authentication cares.
struct bearer_credentials {
  enum class kind { missing, malformed, token } what = kind::missing;
  std::string_view token;  ///< for kind::token, into the field's value
};

/// Reads `Authorization` field values (`count` of them; `value` is the first): no field is
/// `missing`; several fields, another scheme, no token or a token that is not token68 are
/// `malformed`; `Bearer <token>` (scheme in any case, one or more spaces) is a `token`.
bearer_credentials parse_bearer(std::size_t count, std::string_view value) noexcept;

/// Whether `given` equals `expected`, in a time that depends on given.size() only: every
/// byte of `given` is compared (against `expected` repeated when it is shorter or longer),
/// the differences are OR-ed together, and the lengths are compared by the same OR. Neither
/// the first differing byte nor `expected`'s length shows in how long it takes.
bool tokens_equal(std::string_view given, std::string_view expected) noexcept;

/// The key operation of an admin endpoint label (`reset`, `refund`, `penalize`, `block`),
/// or std::nullopt for any other label.
std::optional<key_operation> admin_operation(std::string_view endpoint) noexcept;

}  // namespace sluice::daemon
