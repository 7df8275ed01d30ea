#include <sluice/http/key_spec.hpp>

#include <sluice/policy.hpp>

#include <cstdint>

#include "http/key_hash.hpp"
#include "http/text.hpp"

namespace sluice::http {
namespace {

constexpr std::size_t max_value_in_key = 128;

// Values are %-escaped so that no value can imitate a separator or another part's tag.
void append_value(std::string& out, std::string_view v) {
  if (v.size() > max_value_in_key) {
    out += '#';
    out += detail::hash128_hex(v);
    return;
  }
  static constexpr char digits[] = "0123456789ABCDEF";
  for (unsigned char c : v) {
    if (c == '%' || c == '|' || c == '#' || c < 0x20 || c == 0x7f) {
      out += '%';
      out += digits[c >> 4];
      out += digits[c & 0xf];
    } else {
      out += char(c);
    }
  }
}

}  // namespace

namespace detail {

// Two independent 64-bit hashes (FNV-1a and a multiply-xorshift) make 128 bits: enough
// that distinct long values do not share a bucket by accident. Not cryptographic.
std::string hash128_hex(std::string_view s) {
  std::uint64_t a = 0xcbf29ce484222325ULL;
  std::uint64_t b = 0x9e3779b97f4a7c15ULL ^ s.size();
  for (unsigned char c : s) {
    a = (a ^ c) * 0x100000001b3ULL;
    b = (b ^ c) * 0xbf58476d1ce4e5b9ULL;
    b ^= b >> 31;
  }
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  for (std::uint64_t v : {a, b}) {
    for (int shift = 60; shift >= 0; shift -= 4) out += digits[(v >> shift) & 0xf];
  }
  return out;
}

std::string limiter_key(std::string_view rule, std::string_view policy, std::string_view derived) {
  std::string key;
  key.reserve(rule.size() + policy.size() + derived.size() + 2);
  key.append(rule).append(":").append(policy).append(":");
  if (key.size() + derived.size() > max_key_size) {
    key += '#';
    key += hash128_hex(derived);
  } else {
    key.append(derived);
  }
  return key;
}

}  // namespace detail

key_spec::key_spec() : alts_{{key_part{}}} {}

std::optional<key_spec> key_spec::parse(std::string_view text, std::string* why) {
  const auto fail = [&](const std::string& reason) -> std::optional<key_spec> {
    if (why) *why = "key \"" + std::string(text) + "\": " + reason;
    return std::nullopt;
  };
  if (detail::trim(text).empty()) {
    return fail("empty (want e.g. ip, header:X-API-Key, ip+path, header:X-User-Id|ip)");
  }
  key_spec spec;
  spec.alts_.clear();
  std::size_t alt_start = 0;
  while (true) {
    const auto bar = text.find('|', alt_start);
    const auto alt_text = text.substr(alt_start, bar - alt_start);
    if (detail::trim(alt_text).empty()) return fail("empty alternative around '|'");
    std::vector<key_part> alt;
    std::size_t part_start = 0;
    while (true) {
      const auto plus = alt_text.find('+', part_start);
      const auto part = detail::trim(alt_text.substr(part_start, plus - part_start));
      if (part.empty()) return fail("empty part around '+'");
      key_part kp;
      if (detail::iequals(part, "ip")) {
        kp.what = key_part::kind::ip;
      } else if (detail::iequals(part, "method")) {
        kp.what = key_part::kind::method;
      } else if (detail::iequals(part, "host")) {
        kp.what = key_part::kind::host;
      } else if (detail::iequals(part, "path")) {
        kp.what = key_part::kind::path;
      } else if (part.size() >= 7 && detail::iequals(part.substr(0, 7), "header:")) {
        kp.what = key_part::kind::header;
        const auto name = detail::trim(part.substr(7));
        if (name.empty()) return fail("header name is empty in \"" + std::string(part) + "\"");
        if (!detail::is_token(name)) {
          return fail("\"" + std::string(name) + "\" is not a valid header name");
        }
        kp.header_name = std::string(name);
      } else {
        return fail("unknown part \"" + std::string(part) +
                    "\" (want ip, method, host, path or header:NAME)");
      }
      for (const auto& earlier : alt) {
        const bool same =
            earlier.what == kp.what && detail::iequals(earlier.header_name, kp.header_name);
        if (same) return fail("part \"" + std::string(part) + "\" repeated");
      }
      alt.push_back(std::move(kp));
      if (plus == std::string_view::npos) break;
      part_start = plus + 1;
    }
    spec.alts_.push_back(std::move(alt));
    if (bar == std::string_view::npos) break;
    alt_start = bar + 1;
  }
  return spec;
}

std::optional<std::string> key_spec::derive(const request_facts& req,
                                            const key_options& opts) const {
  // The client is derived at most once per call, and only if an alternative needs it.
  std::optional<std::string> client;
  for (const auto& alt : alts_) {
    std::string key;
    bool complete = true;
    for (const auto& part : alt) {
      if (!key.empty()) key += '|';
      switch (part.what) {
        case key_part::kind::ip: {
          if (!client) client = derive_client(req, opts).key;
          if (client->empty()) {
            complete = false;
            break;
          }
          key += "ip=";
          append_value(key, *client);
          break;
        }
        case key_part::kind::header: {
          std::optional<std::string> v;
          if (req.headers) v = req.headers(part.header_name);
          if (!v || detail::trim(*v).empty()) {
            complete = false;
            break;
          }
          key += "h:" + detail::to_lower(part.header_name) + "=";
          append_value(key, detail::trim(*v));
          break;
        }
        case key_part::kind::method:
          if (req.method.empty()) {
            complete = false;
            break;
          }
          key += "m=";
          append_value(key, req.method);
          break;
        case key_part::kind::host: {
          // Without the port, as rules match it: `a.example:1` must not be a fresh bucket.
          const auto host = detail::host_only(req.host);
          if (host.empty()) {
            complete = false;
            break;
          }
          key += "host=";
          append_value(key, detail::to_lower(host));
          break;
        }
        case key_part::kind::path: {
          if (req.path.empty()) {
            complete = false;
            break;
          }
          key += "path=";
          append_value(key, normalize_path(req.path));
          break;
        }
      }
      if (!complete) break;
    }
    if (complete) return key;
  }
  return std::nullopt;
}

std::string key_spec::to_string() const {
  std::string out;
  for (std::size_t a = 0; a < alts_.size(); ++a) {
    if (a) out += '|';
    for (std::size_t p = 0; p < alts_[a].size(); ++p) {
      if (p) out += '+';
      switch (alts_[a][p].what) {
        case key_part::kind::ip:
          out += "ip";
          break;
        case key_part::kind::method:
          out += "method";
          break;
        case key_part::kind::host:
          out += "host";
          break;
        case key_part::kind::path:
          out += "path";
          break;
        case key_part::kind::header:
          out += "header:" + alts_[a][p].header_name;
          break;
      }
    }
  }
  return out;
}

}  // namespace sluice::http
