#include <sluice/http/headers.hpp>
#include <sluice/policy.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

#include "algorithm/token_bucket.hpp"

namespace sluice::http {
namespace {

std::string u64(std::uint64_t v) { return std::to_string(v); }

// Retry-After on a denial is at least 1: "0" would invite an immediate retry loop.
std::uint64_t retry_after_header_seconds(const decision& d) {
  return std::max<std::uint64_t>(1, std::uint64_t(ceil_seconds(d.retry_after).count()));
}

// Length of the valid UTF-8 sequence starting at s[i], or 0 when it is not valid.
std::size_t utf8_sequence(std::string_view s, std::size_t i) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  std::size_t n;
  std::uint32_t cp;
  if (c < 0x80) return 1;
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2;
    cp = c & 0x1f;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    cp = c & 0x0f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3f);
  }
  // Overlong forms, surrogates and values past U+10FFFF are invalid.
  if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10ffff ||
      (cp >= 0xd800 && cp <= 0xdfff)) {
    return 0;
  }
  return n;
}

void append_json_string(std::string& out, std::string_view s) {
  static constexpr char hex[] = "0123456789abcdef";
  out += '"';
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
      ++i;
    } else if (c == '\n') {
      out += "\\n";
      ++i;
    } else if (c == '\r') {
      out += "\\r";
      ++i;
    } else if (c == '\t') {
      out += "\\t";
      ++i;
    } else if (c < 0x20 || c == 0x7f) {
      out += "\\u00";
      out += hex[c >> 4];
      out += hex[c & 0xf];
      ++i;
    } else if (const auto n = utf8_sequence(s, i)) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out += "\\ufffd";
      ++i;
    }
  }
  out += '"';
}

}  // namespace

std::chrono::seconds ceil_seconds(std::chrono::milliseconds d) noexcept {
  if (d.count() <= 0) return std::chrono::seconds{0};
  // Not (ms + 999) / 1000: that overflows for the largest durations.
  return std::chrono::seconds{d.count() / 1000 + (d.count() % 1000 != 0 ? 1 : 0)};
}

std::uint64_t policy_window_seconds(const sluice::policy& p) noexcept {
  if (sluice::validate(p)) return 1;
  // A window's own length; a bucket's time to fill from empty, at the rate the limiter
  // really uses (whole milli-tokens per second, not the configured double: 0.0015/s refills
  // as 0.002/s, so its window is 500 s, not 667).
  std::int64_t full_ms = p.window.count();
  if (!sluice::is_window(p.algorithm)) {
    const auto params = sluice::detail::to_params(p, 1);
    full_ms = (params.capacity_ut + params.rate_ut_per_ms - 1) / params.rate_ut_per_ms;
  }
  return std::max<std::uint64_t>(1, static_cast<std::uint64_t>((full_ms + 999) / 1000));
}

std::string sf_string(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c < 0x20 || c > 0x7e) {
      out += '?';
    } else {
      out += c;
    }
  }
  out += '"';
  return out;
}

std::vector<header_field> rate_limit_headers(const decision& d, std::string_view policy_name,
                                             const sluice::policy& p) {
  const auto reset = std::uint64_t(ceil_seconds(d.reset_after).count());
  const auto t = d.allowed ? reset : retry_after_header_seconds(d);
  const auto name = sf_string(policy_name);
  std::vector<header_field> h;
  h.reserve(6);
  h.push_back({"X-RateLimit-Limit", u64(d.limit)});
  h.push_back({"X-RateLimit-Remaining", u64(d.remaining)});
  h.push_back({"X-RateLimit-Reset", u64(reset)});
  h.push_back({"RateLimit-Policy",
               name + ";q=" + u64(sluice::limit_of(p)) + ";w=" + u64(policy_window_seconds(p))});
  h.push_back({"RateLimit", name + ";r=" + u64(d.remaining) + ";t=" + u64(t)});
  if (!d.allowed) h.push_back({"Retry-After", u64(retry_after_header_seconds(d))});
  return h;
}

std::vector<header_field> rate_limit_headers(const evaluation& e) {
  const auto* o = e.binding_outcome();
  const auto* p = e.binding_policy();
  if (!o || !p) return {};
  return rate_limit_headers(o->result, o->policy, *p);
}

std::string to_json(const problem& p) {
  std::string out = "{\"type\":";
  append_json_string(out, p.type);
  out += ",\"title\":";
  append_json_string(out, p.title);
  out += ",\"status\":" + std::to_string(p.status);
  if (!p.detail.empty()) {
    out += ",\"detail\":";
    append_json_string(out, p.detail);
  }
  if (!p.instance.empty()) {
    out += ",\"instance\":";
    append_json_string(out, p.instance);
  }
  if (p.retry_after) out += ",\"retry_after\":" + u64(*p.retry_after);
  if (!p.violated_policies.empty()) {
    out += ",\"violated-policies\":[";
    for (std::size_t i = 0; i < p.violated_policies.size(); ++i) {
      if (i) out += ',';
      append_json_string(out, p.violated_policies[i]);
    }
    out += ']';
  }
  out += '}';
  return out;
}

problem rate_limited_problem(const decision& d, std::string_view policy_name, unsigned status) {
  problem p;
  p.type = std::string(quota_exceeded_type);
  p.title = "Quota exceeded";
  p.status = status;
  const auto wait = retry_after_header_seconds(d);
  p.detail = "Rate limit of policy \"" + std::string(policy_name) + "\" exceeded; retry in " +
             u64(wait) + (wait == 1 ? " second." : " seconds.");
  p.retry_after = wait;
  p.violated_policies.emplace_back(policy_name);
  return p;
}

problem rate_limited_problem(const evaluation& e, unsigned status) {
  const auto* o = e.binding_outcome();
  if (!o) {
    // Not reachable for a denied evaluation (a denial always has a binding rule); keep a
    // well-formed answer anyway.
    problem p;
    p.type = std::string(quota_exceeded_type);
    p.title = "Quota exceeded";
    p.status = status;
    return p;
  }
  auto p = rate_limited_problem(o->result, o->policy, status);
  p.violated_policies.clear();
  for (const auto& other : e.outcomes) {
    if (other.skipped || other.shadow || other.result.allowed) continue;
    if (std::find(p.violated_policies.begin(), p.violated_policies.end(), other.policy) ==
        p.violated_policies.end()) {
      p.violated_policies.push_back(other.policy);
    }
  }
  return p;
}

rate_limit_response make_response(const evaluation& e, unsigned deny_status) {
  rate_limit_response r;
  r.allowed = e.allowed;
  r.headers = rate_limit_headers(e);
  if (!e.allowed) {
    r.status = deny_status;
    r.body = to_json(rate_limited_problem(e, deny_status));
  }
  return r;
}

}  // namespace sluice::http
