#include "redis/url_query.hpp"

namespace sluice::redis {
namespace {

int hex_value(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool fail(std::string* why, std::string text) {
  if (why) *why = std::move(text);
  return false;
}

}  // namespace

// A stray '%' is an error rather than a silent literal, so a password (or a file name)
// that was meant to be encoded does not arrive half-decoded.
bool percent_decode(std::string_view in, std::string& out) {
  out.clear();
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out += in[i];
      continue;
    }
    if (i + 2 >= in.size()) return false;
    const int hi = hex_value(in[i + 1]);
    const int lo = hex_value(in[i + 2]);
    if (hi < 0 || lo < 0) return false;
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return true;
}

bool parse_query(std::string_view query, std::vector<query_option>& out, std::string* why) {
  out.clear();
  if (query.empty()) return true;
  for (std::size_t start = 0; start <= query.size();) {
    const auto amp = std::min(query.find('&', start), query.size());
    const std::string_view pair = query.substr(start, amp - start);
    start = amp + 1;
    const auto eq = pair.find('=');
    if (eq == std::string_view::npos || eq == 0)
      return fail(why, "query options must be name=value, got \"" + std::string(pair) + "\"");
    query_option o;
    o.name = std::string(pair.substr(0, eq));
    if (!percent_decode(pair.substr(eq + 1), o.value))
      return fail(why, "bad percent-encoding in query option " + o.name);
    if (o.value.empty()) return fail(why, "query option " + o.name + "= needs a value");
    for (const auto& seen : out) {
      if (seen.name == o.name) return fail(why, "query option " + o.name + " is given twice");
    }
    out.push_back(std::move(o));
  }
  return true;
}

option_result apply_tls_option(const query_option& o, redis_tls& tls, std::string* why) {
  if (o.name == "ca") {
    tls.ca_file = o.value;
  } else if (o.name == "cert") {
    tls.cert_file = o.value;
  } else if (o.name == "key") {
    tls.key_file = o.value;
  } else if (o.name == "sni") {
    tls.sni = o.value;
  } else if (o.name == "verify") {
    if (o.value == "yes") {
      tls.verify = true;
    } else if (o.value == "no") {
      tls.verify = false;
    } else {
      fail(why, "verify must be yes or no, got \"" + o.value + "\"");
      return option_result::invalid;
    }
  } else {
    return option_result::unknown;
  }
  return option_result::applied;
}

bool check_tls(const redis_tls& tls, bool had_tls_options, std::string_view tls_scheme,
               std::string* why) {
  if (had_tls_options && !tls.enabled)
    return fail(why, "the options " + std::string(tls_option_names) + " are TLS options: use " +
                         std::string(tls_scheme));
  if (tls.cert_file.empty() != tls.key_file.empty())
    return fail(why, "a client certificate needs both cert=FILE and key=FILE");
  return true;
}

}  // namespace sluice::redis
