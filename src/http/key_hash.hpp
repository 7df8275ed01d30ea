#pragma once
// How a rule's derived key becomes a limiter key, shared by evaluate.cpp and key_spec.cpp.
#include <string>
#include <string_view>

namespace sluice::http::detail {

// 32 hex digits of a 128-bit non-cryptographic hash of `s`.
std::string hash128_hex(std::string_view s);

// `<rule>:<policy>:<derived>`; a derived key that would make the whole key longer than
// sluice::max_key_size is replaced by `#` and its hash.
std::string limiter_key(std::string_view rule, std::string_view policy, std::string_view derived);

}  // namespace sluice::http::detail
