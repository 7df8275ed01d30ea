// sluice::http::normalize_path: the path rules match and `path` keys use. Whatever the
// target, the result must be a canonical path, and a canonical path must be its own
// normal form: otherwise two spellings of one resource could be told apart by a rule.
#include <sluice/http/request.hpp>

#include "fuzz_check.hpp"

namespace {

bool is_hex_upper(char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F'); }
int hex(char c) { return c <= '9' ? c - '0' : c - 'A' + 10; }
bool is_unreserved(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' ||
         c == '.' || c == '_' || c == '~';
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto target = sluice::fuzz::as_text(data, size);
  const std::string n = sluice::http::normalize_path(target);

  SLUICE_FUZZ_CHECK(!n.empty() && n.front() == '/');
  SLUICE_FUZZ_CHECK(n.find("//") == std::string::npos);
  SLUICE_FUZZ_CHECK(n.find("/./") == std::string::npos);
  SLUICE_FUZZ_CHECK(n.find("/../") == std::string::npos);
  SLUICE_FUZZ_CHECK(!n.ends_with("/.") && !n.ends_with("/.."));
  // The query and fragment are gone; an escaped '?' or '#' stays escaped.
  SLUICE_FUZZ_CHECK(n.find_first_of("?#") == std::string::npos);
  // Every '%' starts an escape in upper-case hex of a byte that is not unreserved (those
  // are decoded): a literal '%' that is not an escape could pair with what follows it on
  // a second pass.
  for (std::size_t i = n.find('%'); i != std::string::npos; i = n.find('%', i + 1)) {
    SLUICE_FUZZ_CHECK(i + 2 < n.size() && is_hex_upper(n[i + 1]) && is_hex_upper(n[i + 2]));
    SLUICE_FUZZ_CHECK(!is_unreserved(static_cast<char>(hex(n[i + 1]) * 16 + hex(n[i + 2]))));
  }
  SLUICE_FUZZ_CHECK(sluice::http::normalize_path(n) == n);
  return 0;
}
