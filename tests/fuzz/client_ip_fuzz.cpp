// sluice::http::derive_client: who the client is, from the peer and, when the peer is a
// trusted proxy, X-Forwarded-For or Forwarded. Checked against its documented contract.
//
// Input: one control byte (bits 0-1 the forwarded_header mode, bit 2 a v4 /24 prefix,
// bit 3 a v6 /48 prefix instead of /32 and /64), then lines: the peer, the
// X-Forwarded-For value and the Forwarded value; a header whose line is missing is absent.
#include <sluice/http/client_ip.hpp>

#include <optional>
#include <string>
#include <vector>

#include "fuzz_check.hpp"

namespace {

using namespace sluice::http;

bool is_space(char c) { return c == ' ' || c == '\t'; }
bool blank(std::string_view s) {
  for (char c : s) {
    if (!is_space(c)) return false;
  }
  return true;
}
std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// The key of an address under `opts`, as client_identity documents it.
std::string expected_key(const ip_address& a, const key_options& opts) {
  const unsigned width = a.v4 ? 32 : 128;
  const unsigned prefix = a.v4 ? opts.ipv4_prefix : opts.ipv6_prefix;
  if (prefix >= width) return to_string(a);
  return to_string(mask(a, prefix)) + "/" + std::to_string(prefix);
}

bool is_obfuscated(std::string_view s) {
  if (s.size() < 2 || s.front() != '_') return false;
  for (char c : s.substr(1)) {
    const bool ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

struct headers {
  std::optional<std::string> xff, fwd;
  mutable std::vector<std::string> asked;  // names looked up, in order

  header_lookup lookup() const {
    return [this](std::string_view name) -> std::optional<std::string> {
      asked.emplace_back(name);
      if (name == "X-Forwarded-For") return xff;
      if (name == "Forwarded") return fwd;
      return std::nullopt;
    };
  }
};

bool same(const client_identity& a, const client_identity& b) {
  return a.address == b.address && a.key == b.key;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  key_options opts;
  opts.trusted_proxies = {*parse_cidr("10.0.0.0/8"), *parse_cidr("2001:db8::/32"),
                          *parse_cidr("127.0.0.1")};
  opts.header = static_cast<forwarded_header>((data[0] & 3) % 3);
  opts.ipv4_prefix = (data[0] & 4) ? 24 : 32;
  opts.ipv6_prefix = (data[0] & 8) ? 48 : 64;
  sluice::fuzz::lines in(sluice::fuzz::as_text(data + 1, size - 1));
  std::string_view line;
  request_facts req;
  if (in.next(line)) req.peer = std::string(line);
  headers h;
  if (in.next(line)) h.xff = std::string(line);
  if (in.next(line)) h.fwd = std::string(line);
  req.headers = h.lookup();

  const auto id = derive_client(req, opts);
  const auto peer = parse_ip(req.peer);
  const bool trusted = peer && is_trusted(*peer, opts);

  // Empty only when the request has no peer at all.
  SLUICE_FUZZ_CHECK(id.key.empty() == trim(req.peer).empty());
  if (id.address) {
    SLUICE_FUZZ_CHECK(id.key == expected_key(*id.address, opts));
  } else {
    // Not an address: the peer's own text, or an obfuscated identifier from a trusted proxy.
    SLUICE_FUZZ_CHECK(id.key == trim(req.peer) || (trusted && is_obfuscated(id.key)));
  }
  if (!trusted) {
    // Forwarding headers of an untrusted peer are not even read.
    SLUICE_FUZZ_CHECK(h.asked.empty());
    SLUICE_FUZZ_CHECK(id.address == peer);
    return 0;
  }
  // Only the header the mode names is read (both, in that order, for the fallback mode).
  for (const auto& name : h.asked) {
    if (opts.header == forwarded_header::x_forwarded_for) SLUICE_FUZZ_CHECK(name != "Forwarded");
    if (opts.header == forwarded_header::forwarded) SLUICE_FUZZ_CHECK(name != "X-Forwarded-For");
  }
  const bool uses_fwd = opts.header != forwarded_header::x_forwarded_for && h.fwd && !blank(*h.fwd);
  const bool uses_xff =
      !uses_fwd && opts.header != forwarded_header::forwarded && h.xff && !blank(*h.xff);
  if (!uses_fwd && !uses_xff) {
    SLUICE_FUZZ_CHECK(id.address == peer);
    return 0;
  }
  // A client writes the left end of the header: once an untrusted hop to its right decided
  // the identity, nothing prepended on the left may change it.
  if (id.address && !is_trusted(*id.address, opts)) {
    headers more = h;
    more.asked.clear();
    if (uses_fwd) {
      more.fwd = "for=198.51.100.1, " + *h.fwd;
    } else {
      more.xff = "198.51.100.1, " + *h.xff;
    }
    request_facts req2 = req;
    req2.headers = more.lookup();
    SLUICE_FUZZ_CHECK(same(derive_client(req2, opts), id));
  }
  return 0;
}
