// sluice::http::key_spec: parsing a spec, and the key a parsed spec builds from a request.
//
// Input lines: the spec; then the peer, method, path and host; then header lines
// `Name: value` (repeated names are joined with ", " as a server does).
#include <sluice/http/key_spec.hpp>

#include <optional>
#include <string>
#include <vector>

#include "fuzz_check.hpp"

namespace {

using namespace sluice::http;

bool is_space(char c) { return c == ' ' || c == '\t'; }
std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}
char lower(char c) { return (c >= 'A' && c <= 'Z') ? char(c - 'A' + 'a') : c; }
std::string to_lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = lower(c);
  return out;
}
bool iequals(std::string_view a, std::string_view b) { return to_lower(a) == to_lower(b); }

// The host without its port, as key_spec documents it (`[::1]:80` -> `[::1]`).
std::string_view host_only(std::string_view host) {
  host = trim(host);
  if (!host.empty() && host.front() == '[') {
    const auto close = host.find(']');
    return close == std::string_view::npos ? host : host.substr(0, close + 1);
  }
  const auto colon = host.find(':');
  if (colon != std::string_view::npos && host.find(':', colon + 1) == std::string_view::npos)
    return host.substr(0, colon);
  return host;
}

int hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Undoes the key's %-escaping; std::nullopt for anything the escaping cannot produce.
std::optional<std::string> unescape(std::string_view v) {
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (v[i] != '%') {
      out += v[i];
      continue;
    }
    if (i + 2 >= v.size() || hex(v[i + 1]) < 0 || hex(v[i + 2]) < 0) return std::nullopt;
    out += char(hex(v[i + 1]) * 16 + hex(v[i + 2]));
    i += 2;
  }
  return out;
}

struct facts {
  request_facts req;
  std::vector<std::pair<std::string, std::string>> fields;

  std::optional<std::string> header(std::string_view name) const {
    std::optional<std::string> v;
    for (const auto& [n, value] : fields) {
      if (!iequals(n, name)) continue;
      if (v) {
        *v += ", ";
        *v += value;
      } else {
        v = value;
      }
    }
    return v;
  }
};

// What one part contributes to a key: its tag and its raw value (std::nullopt: absent).
std::pair<std::string, std::optional<std::string>> part_of(const key_part& p, const facts& f,
                                                           const key_options& opts) {
  switch (p.what) {
    case key_part::kind::ip: {
      auto c = derive_client(f.req, opts).key;
      return {"ip", c.empty() ? std::nullopt : std::optional(c)};
    }
    case key_part::kind::header: {
      auto v = f.header(p.header_name);
      if (!v || trim(*v).empty()) return {"h:" + to_lower(p.header_name), std::nullopt};
      return {"h:" + to_lower(p.header_name), std::string(trim(*v))};
    }
    case key_part::kind::method:
      return {"m", f.req.method.empty() ? std::nullopt : std::optional(f.req.method)};
    case key_part::kind::host: {
      const auto h = host_only(f.req.host);
      return {"host", h.empty() ? std::nullopt : std::optional(to_lower(h))};
    }
    case key_part::kind::path:
      return {"path",
              f.req.path.empty() ? std::nullopt : std::optional(normalize_path(f.req.path))};
  }
  return {"?", std::nullopt};
}

// The key of one alternative, checked part by part: `tag=value` joined by '|', each value
// escaped so that it cannot imitate a separator (or, past 128 bytes, `#` and a hash).
// std::nullopt when a part is absent.
std::optional<std::string> check_alternative(const std::vector<key_part>& alt, const facts& f,
                                             const key_options& opts, std::string_view key) {
  std::vector<std::pair<std::string, std::optional<std::string>>> parts;
  for (const auto& p : alt) {
    parts.push_back(part_of(p, f, opts));
    if (!parts.back().second) return std::nullopt;
  }
  std::size_t pos = 0;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const auto& [tag, value] = parts[i];
    auto end = key.find('|', pos);
    if (end == std::string_view::npos) end = key.size();
    const auto field = key.substr(pos, end - pos);
    SLUICE_FUZZ_CHECK(field.starts_with(tag + "="));
    const auto escaped = field.substr(tag.size() + 1);
    if (value->size() > 128) {
      SLUICE_FUZZ_CHECK(escaped.size() == 33 && escaped.front() == '#');
    } else {
      SLUICE_FUZZ_CHECK(unescape(escaped) == *value);
    }
    SLUICE_FUZZ_CHECK((i + 1 == alt.size()) == (end == key.size()));
    pos = end + 1;
  }
  return std::string(key);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  sluice::fuzz::lines in(sluice::fuzz::as_text(data, size));
  std::string_view text;
  in.next(text);
  std::string why;
  const auto spec = key_spec::parse(text, &why);
  if (!spec) {
    SLUICE_FUZZ_CHECK(!why.empty());
    return 0;
  }
  SLUICE_FUZZ_CHECK(!spec->alternatives().empty());
  for (const auto& alt : spec->alternatives()) SLUICE_FUZZ_CHECK(!alt.empty());
  // The canonical spelling reads back as the same spec.
  const auto canonical = spec->to_string();
  const auto again = key_spec::parse(canonical);
  SLUICE_FUZZ_CHECK(again && *again == *spec && again->to_string() == canonical);

  facts f;
  std::string_view line;
  if (in.next(line)) f.req.peer = std::string(line);
  if (in.next(line)) f.req.method = std::string(line);
  if (in.next(line)) f.req.path = std::string(line);
  if (in.next(line)) f.req.host = std::string(line);
  while (in.next(line)) {
    const auto colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    f.fields.emplace_back(std::string(line.substr(0, colon)), std::string(line.substr(colon + 1)));
  }
  f.req.headers = [&f](std::string_view name) { return f.header(name); };
  key_options opts;
  opts.trusted_proxies = {*parse_cidr("10.0.0.0/8")};

  const auto key = spec->derive(f.req, opts);
  if (key) {
    for (unsigned char c : *key) SLUICE_FUZZ_CHECK(c >= 0x20 && c != 0x7f);
  }
  // The first complete alternative gives the key; none complete: no key.
  std::optional<std::string> expected;
  for (const auto& alt : spec->alternatives()) {
    if ((expected = check_alternative(alt, f, opts, key ? *key : std::string_view{}))) break;
  }
  SLUICE_FUZZ_CHECK(expected == key);
  return 0;
}
