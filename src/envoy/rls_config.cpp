// Loading the reference rate limit service's YAML. The reference (envoyproxy/ratelimit,
// src/config/config_impl.go) reads a file twice: once into a generic map to check its keys
// and value types (validateYamlKeys), then into typed structs (yaml.v2, not strict). We walk
// the yaml-cpp tree in the same two passes so that the same files are refused for the same
// reasons, and add what the reference lacks: the line of every error.
#include "envoy/rls_config.hpp"

#include <sluice/http/duration.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <regex>
#include <set>
#include <sstream>
#include <system_error>
#include <utility>

#include <yaml-cpp/yaml.h>

namespace sluice::envoy {

namespace {

// ---- units ------------------------------------------------------------------------------

struct unit_row {
  rls_unit unit;
  std::string_view name;
  std::int64_t seconds;
};

// The reference's UnitToDivider: a month is 30 days and a year 365, whatever the calendar.
constexpr std::array<unit_row, 7> unit_table{{
    {rls_unit::second, "SECOND", 1},
    {rls_unit::minute, "MINUTE", 60},
    {rls_unit::hour, "HOUR", 3600},
    {rls_unit::day, "DAY", 86400},
    {rls_unit::month, "MONTH", 86400LL * 30},
    {rls_unit::year, "YEAR", 86400LL * 365},
    {rls_unit::week, "WEEK", 86400LL * 7},
}};

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::toupper(static_cast<unsigned char>(a[i])) !=
        std::toupper(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

// ---- YAML 1.1 scalar resolution, as yaml.v2 does it ---------------------------------------

// What a scalar is once resolved. yaml-cpp keeps every scalar as text; yaml.v2 (and so the
// reference) decides from the plain text whether it is a null, a bool, an int or a float.
enum class scalar_kind { null, boolean, integer, floating, string };

constexpr std::array<std::string_view, 11> true_words{"y",  "Y",  "yes",  "Yes",  "YES", "on",
                                                      "On", "ON", "true", "True", "TRUE"};
constexpr std::array<std::string_view, 11> false_words{
    "n", "N", "no", "No", "NO", "off", "Off", "OFF", "false", "False", "FALSE"};

bool in(std::string_view s, const auto& words) {
  return std::find(words.begin(), words.end(), s) != words.end();
}

// Go's strconv.ParseInt(s, 0, 64) after yaml.v2 removed the underscores: an optional sign,
// then 0x / 0o / 0b / a leading 0 (octal) or decimal digits.
std::optional<std::int64_t> parse_go_int(std::string s) {
  s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
  if (s.empty()) return std::nullopt;
  bool negative = false;
  std::size_t i = 0;
  if (s[0] == '+' || s[0] == '-') {
    negative = s[0] == '-';
    i = 1;
  }
  int base = 10;
  if (s.size() - i > 2 && s[i] == '0' && (s[i + 1] == 'x' || s[i + 1] == 'X')) {
    base = 16;
    i += 2;
  } else if (s.size() - i > 2 && s[i] == '0' && (s[i + 1] == 'o' || s[i + 1] == 'O')) {
    base = 8;
    i += 2;
  } else if (s.size() - i > 2 && s[i] == '0' && (s[i + 1] == 'b' || s[i + 1] == 'B')) {
    base = 2;
    i += 2;
  } else if (s.size() - i > 1 && s[i] == '0') {
    base = 8;
    i += 1;
  }
  if (i >= s.size()) return std::nullopt;
  std::uint64_t magnitude = 0;
  const char* first = s.data() + i;
  const char* last = s.data() + s.size();
  auto [p, ec] = std::from_chars(first, last, magnitude, base);
  if (ec != std::errc{} || p != last) return std::nullopt;
  constexpr auto max = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  if (negative) {
    if (magnitude > max + 1) return std::nullopt;
    return magnitude == max + 1 ? std::numeric_limits<std::int64_t>::min()
                                : -static_cast<std::int64_t>(magnitude);
  }
  if (magnitude > max) return std::nullopt;
  return static_cast<std::int64_t>(magnitude);
}

bool looks_like_float(const std::string& s) {
  static const std::regex yaml_float(R"(^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$)");
  static const std::regex special(R"(^[-+]?\.(inf|Inf|INF)$|^\.(nan|NaN|NAN)$)");
  std::string plain = s;
  plain.erase(std::remove(plain.begin(), plain.end(), '_'), plain.end());
  return std::regex_match(plain, yaml_float) || std::regex_match(s, special);
}

scalar_kind kind_of(const YAML::Node& n) {
  const std::string& tag = n.Tag();
  const std::string& text = n.Scalar();
  if (tag == "!") return scalar_kind::string;  // quoted
  constexpr std::string_view core = "tag:yaml.org,2002:";
  if (tag.starts_with(core)) {
    const std::string_view t = std::string_view(tag).substr(core.size());
    if (t == "null") return scalar_kind::null;
    if (t == "bool") return scalar_kind::boolean;
    if (t == "int") return scalar_kind::integer;
    if (t == "float") return scalar_kind::floating;
    return scalar_kind::string;
  }
  if (tag != "?") return scalar_kind::string;  // a local tag: keep the text
  if (text.empty() || text == "~" || text == "null" || text == "Null" || text == "NULL")
    return scalar_kind::null;
  if (in(text, true_words) || in(text, false_words)) return scalar_kind::boolean;
  if (parse_go_int(text)) return scalar_kind::integer;
  if (looks_like_float(text)) return scalar_kind::floating;
  return scalar_kind::string;
}

// ---- errors -------------------------------------------------------------------------------

// Thrown inside the loader only; the public functions return it as a value.
struct load_failure {
  rls_config_error error;
};

int line_of(const YAML::Node& n) {
  if (!n.IsDefined()) return 0;
  const auto m = n.Mark();
  return m.line < 0 ? 0 : m.line + 1;
}

// How a node is shown in a message: its text for a scalar, its shape otherwise.
std::string show(const YAML::Node& n) {
  if (n.IsScalar()) return n.Scalar();
  if (n.IsSequence()) return "a list";
  if (n.IsMap()) return "a mapping";
  return "null";
}

// ---- JSON for metadata --------------------------------------------------------------------

void json_string(std::string& out, std::string_view s) {
  out += '"';
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (u < 0x20) {
          constexpr char hex[] = "0123456789abcdef";
          out += "\\u00";
          out += hex[u >> 4];
          out += hex[u & 15];
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

// ---- the loader ---------------------------------------------------------------------------

// Keys the reference accepts, at any level of a file (it checks names, not places), and
// Sluice's two extensions, which belong inside `rate_limit`.
constexpr std::array<std::string_view, 16> reference_keys{"domain",
                                                          "key",
                                                          "value",
                                                          "descriptors",
                                                          "rate_limit",
                                                          "unit",
                                                          "requests_per_unit",
                                                          "unlimited",
                                                          "shadow_mode",
                                                          "quota_mode",
                                                          "name",
                                                          "replaces",
                                                          "detailed_metric",
                                                          "value_to_metric",
                                                          "share_threshold",
                                                          "metadata"};
constexpr std::array<std::string_view, 3> sluice_keys{"algorithm", "burst", "lease_ttl"};

class loader {
 public:
  loader(rls_config& config, const rls_load_options& options)
      : config_(config), options_(options) {}

  void load(const rls_source& source) {
    file_ = source.name;
    YAML::Node root;
    try {
      root = YAML::Load(source.text);
    } catch (const YAML::Exception& e) {
      fail_at(e.mark.line < 0 ? 0 : e.mark.line + 1, "error loading config file: " + e.msg);
    }
    try {
      check_root(root);
      load_root(root);
    } catch (const YAML::Exception& e) {
      fail_at(e.mark.line < 0 ? 0 : e.mark.line + 1, "error loading config file: " + e.msg);
    }
  }

 private:
  [[noreturn]] void fail_at(int line, std::string message) const {
    throw load_failure{rls_config_error{file_, line, std::move(message)}};
  }
  [[noreturn]] void fail(const YAML::Node& at, std::string message) const {
    fail_at(line_of(at), std::move(message));
  }

  static bool is_merge_key(const YAML::Node& k) {
    return k.IsScalar() && k.Tag() == "?" && k.Scalar() == "<<";
  }

  // The mappings a merge key's value brings in: one mapping, or a list of them.
  std::vector<YAML::Node> merge_sources(const YAML::Node& v) const {
    static constexpr const char* wrong =
        "error loading config file: map merge requires map or sequence of maps as the value";
    std::vector<YAML::Node> out;
    if (v.IsMap()) {
      out.push_back(v);
    } else if (v.IsSequence()) {
      for (const auto& e : v) {
        if (!e.IsMap()) fail(e, wrong);
        out.push_back(e);
      }
    } else {
      fail(v, wrong);
    }
    return out;
  }

  // ---- pass 1: the reference's validateYamlKeys -----------------------------------------

  void check_root(const YAML::Node& root) const {
    if (!root.IsDefined() || root.IsNull()) return;  // an empty file: "empty domain" below
    if (!root.IsMap()) {
      fail(root,
           "error loading config file: the document must be a mapping (domain, "
           "descriptors), not " +
               show(root));
    }
    check_map(root, 0);
  }

  void check_depth(const YAML::Node& at, int depth) const {
    // An alias inside its own anchor (`a: &b {c: *b}`) is an endless tree to yaml-cpp.
    if (depth > 64) fail(at, "error loading config file: nested too deeply");
  }

  void check_map(const YAML::Node& map, int depth) const {
    check_depth(map, depth);
    for (const auto& kv : map) {
      const YAML::Node& k = kv.first;
      if (is_merge_key(k)) {
        // `<<: *defaults` (YAML's merge key, which yaml.v2 applies): the merged keys are
        // checked like the mapping's own.
        for (const auto& merged : merge_sources(kv.second)) check_map(merged, depth + 1);
        continue;
      }
      if (!k.IsScalar() || kind_of(k) != scalar_kind::string) {
        fail(k, "config error, key is not of type string: " + show(k));
      }
      const std::string& name = k.Scalar();
      const bool reference = in(name, reference_keys);
      if (!reference && !in(name, sluice_keys)) fail(k, "config error, unknown key '" + name + "'");
      // Metadata is free-form: the reference checks neither its keys nor its values.
      if (name == "metadata") continue;
      check_value(kv.second, depth + 1);
    }
  }

  void check_value(const YAML::Node& v, int depth) const {
    check_depth(v, depth);
    if (v.IsSequence()) {
      for (const auto& e : v) {
        if (!e.IsMap()) {
          fail(e, "config error, yaml file contains list of type other than map: " + show(e));
        }
        check_map(e, depth + 1);
      }
    } else if (v.IsMap()) {
      check_map(v, depth + 1);
    } else if (v.IsScalar() && kind_of(v) == scalar_kind::floating) {
      // The reference's generic pass accepts strings, ints, bools and nulls as leaves.
      fail(v, "error checking config: " + v.Scalar() +
                  " is a number with a fraction or exponent; quote it if it is a value");
    }
  }

  // ---- pass 2: typed reading (yaml.v2, not strict) --------------------------------------

  // yaml.v2 keeps the last of repeated keys when decoding into a struct.
  // A key set in the mapping itself wins over one merged in with `<<`; of several merged
  // mappings the first that sets it wins (the YAML merge key's rule).
  static YAML::Node field(const YAML::Node& map, std::string_view name) {
    YAML::Node found(YAML::NodeType::Undefined);  // absent unless seen
    for (const auto& kv : map) {
      if (!is_merge_key(kv.first) && kv.first.IsScalar() && kv.first.Scalar() == name) {
        found.reset(kv.second);
      }
    }
    if (found.IsDefined()) return found;
    for (const auto& kv : map) {
      if (!is_merge_key(kv.first)) continue;
      const auto append = [&](const YAML::Node& merged) {
        if (!found.IsDefined() && merged.IsMap()) found.reset(field(merged, name));
      };
      if (kv.second.IsSequence()) {
        for (const auto& e : kv.second) append(e);
      } else {
        append(kv.second);
      }
    }
    return found;
  }

  // A string field: any scalar's text (yaml.v2 turns 123 or true into "123" / "true"),
  // "" for null or absent.
  std::string string_field(const YAML::Node& map, std::string_view name) const {
    const YAML::Node v = field(map, name);
    if (!v.IsDefined() || v.IsNull()) return {};
    if (!v.IsScalar()) fail(v, std::string(name) + ": must be a string, not " + show(v));
    if (kind_of(v) == scalar_kind::null) return {};
    return v.Scalar();
  }

  bool bool_field(const YAML::Node& map, std::string_view name) const {
    const YAML::Node v = field(map, name);
    if (!v.IsDefined() || v.IsNull()) return false;
    if (v.IsScalar()) {
      switch (kind_of(v)) {
        case scalar_kind::null:
          return false;
        case scalar_kind::boolean:
          if (v.Tag() == "?") return in(v.Scalar(), true_words);
          return v.as<bool>();  // !!bool: yaml-cpp reads its spellings
        default:
          break;
      }
    }
    fail(v, std::string(name) + ": must be true or false, not " + show(v));
  }

  // A YAML list of mappings, or null.
  std::vector<YAML::Node> list_field(const YAML::Node& map, std::string_view name,
                                     std::string_view of) const {
    const YAML::Node v = field(map, name);
    std::vector<YAML::Node> out;
    if (!v.IsDefined() || v.IsNull() || (v.IsScalar() && kind_of(v) == scalar_kind::null))
      return out;
    if (!v.IsSequence()) {
      fail(v, std::string(name) + ": must be a list of " + std::string(of) + ", not " + show(v));
    }
    for (const auto& e : v) out.push_back(e);
    return out;
  }

  static bool is_null(const YAML::Node& v) {
    return !v.IsDefined() || v.IsNull() || (v.IsScalar() && kind_of(v) == scalar_kind::null);
  }

  void load_root(const YAML::Node& root) {
    std::string domain;
    std::vector<YAML::Node> descriptors;
    YAML::Node domain_node = root;
    if (root.IsDefined() && root.IsMap()) {
      domain = string_field(root, "domain");
      if (const YAML::Node d = field(root, "domain"); d.IsDefined()) domain_node.reset(d);
      descriptors = list_field(root, "descriptors", "descriptors");
    }
    for (const char* misplaced : {"algorithm", "burst", "lease_ttl"}) {
      if (const YAML::Node v = field(root, misplaced); root.IsMap() && v.IsDefined()) {
        fail(v, std::string(misplaced) + ": belongs inside a descriptor's rate_limit");
      }
    }
    const int domain_line = std::max(line_of(domain_node), 1);
    if (domain.empty()) fail_at(domain_line, "config file cannot have empty domain");

    auto [it, inserted] = config_.domains.try_emplace(domain);
    rls_domain& d = it->second;
    if (inserted) {
      d.name = domain;
    } else if (!options_.merge_domains) {
      fail_at(domain_line, "duplicate domain '" + domain +
                               "' in config file (already loaded from " + d.files.front() + ")");
    }
    d.files.push_back(file_);
    load_level(domain, descriptors, d.descriptors, d.index, composites_[domain]);
  }

  // Loads one list of descriptors into `level`, appending (a merged domain's top level keeps
  // the earlier files' descriptors, and their composites, to refuse duplicates across files).
  void load_level(const std::string& parent_key, const std::vector<YAML::Node>& yaml,
                  std::vector<rls_descriptor_config>& level, rls_level_index& index,
                  std::set<std::string>& composites) {
    for (const auto& node : yaml) {
      rls_descriptor_config d = load_descriptor(parent_key, node, composites);
      level.push_back(std::move(d));
      const std::size_t at = level.size() - 1;
      const rls_descriptor_config& added = level.back();
      auto& by_key = index.keys[added.key];
      if (added.value.empty()) {
        by_key.key_only = at;
      } else {
        by_key.values.emplace(added.value, at);
        if (added.wildcard) by_key.wildcards.push_back(at);
      }
    }
  }

  rls_descriptor_config load_descriptor(const std::string& parent_key, const YAML::Node& node,
                                        std::set<std::string>& composites) {
    rls_descriptor_config d;
    d.file = file_;
    d.line = line_of(node);
    d.key = string_field(node, "key");
    if (d.key.empty()) fail(node, "descriptor has empty key");
    d.value = string_field(node, "value");
    d.composite = d.value.empty() ? d.key : d.key + "_" + d.value;
    d.full_key = parent_key + "." + d.composite;
    // The reference keys a level by "key_value", so it also refuses key "a_b" beside key "a"
    // with value "b"; so do we.
    if (!composites.insert(d.composite).second) {
      fail(node, "duplicate descriptor composite key '" + d.full_key + "'");
    }
    d.wildcard = d.value.find('*') != std::string::npos;

    d.shadow_mode = bool_field(node, "shadow_mode");
    d.quota_mode = bool_field(node, "quota_mode");
    d.detailed_metric = bool_field(node, "detailed_metric");
    d.value_to_metric = bool_field(node, "value_to_metric");
    d.share_threshold = bool_field(node, "share_threshold");

    for (const char* misplaced : {"algorithm", "burst", "lease_ttl"}) {
      if (const YAML::Node v = field(node, misplaced); v.IsDefined()) {
        fail(v, std::string(misplaced) + ": belongs inside rate_limit (a Sluice extension)");
      }
    }

    if (const YAML::Node rl = field(node, "rate_limit"); !is_null(rl)) {
      if (!rl.IsMap()) fail(rl, "rate_limit: must be a mapping, not " + show(rl));
      d.rate_limit = load_rate_limit(rl);
    }

    if (d.share_threshold && !d.wildcard) {
      fail(node,
           "share_threshold can only be used with wildcard values (containing '*'), but "
           "found key '" +
               d.composite + "'");
    }

    if (const YAML::Node md = field(node, "metadata"); !is_null(md)) {
      if (!md.IsMap()) fail(md, "metadata: must be a mapping, not " + show(md));
      to_json(md, d.metadata_json, 0);
    }

    std::set<std::string> child_composites;
    load_level(d.full_key, list_field(node, "descriptors", "descriptors"), d.descriptors, d.index,
               child_composites);
    return d;
  }

  rls_rate_limit load_rate_limit(const YAML::Node& rl) const {
    rls_rate_limit r;
    r.unlimited = bool_field(rl, "unlimited");
    r.name = string_field(rl, "name");
    const YAML::Node unit_node = field(rl, "unit");
    const std::string unit_text = string_field(rl, "unit");
    const auto unit = parse_unit(unit_text);
    const YAML::Node at = unit_node.IsDefined() ? unit_node : rl;
    if (r.unlimited) {
      if (unit) fail(at, "should not specify rate limit unit when unlimited");
    } else if (!unit) {
      fail(at, "invalid rate limit unit '" + unit_text + "'");
    }
    r.unit = unit.value_or(rls_unit::unknown);

    if (const YAML::Node v = field(rl, "requests_per_unit"); !is_null(v)) {
      r.requests_per_unit = static_cast<std::uint32_t>(
          unsigned_field(v, "requests_per_unit", std::numeric_limits<std::uint32_t>::max()));
    }

    for (const auto& e : list_field(rl, "replaces", "{name: ...} mappings")) {
      std::string name = string_field(e, "name");
      if (name.empty()) fail(e, "should not have an empty replaces entry");
      if (name == r.name) fail(e, "replaces should not contain name of same descriptor");
      r.replaces.push_back(std::move(name));
    }

    // Sluice's extensions.
    bool explicit_algorithm = false;
    if (const YAML::Node a = field(rl, "algorithm"); !is_null(a)) {
      const std::string text = string_field(rl, "algorithm");
      const auto parsed = parse_algorithm(text);
      if (!parsed) {
        fail(a, "algorithm: unknown '" + text +
                    "' (token_bucket, gcra, sliding_window, sliding_window_counter, "
                    "fixed_window)");
      }
      r.algorithm = *parsed;
      explicit_algorithm = true;
    }
    if (const YAML::Node b = field(rl, "burst"); !is_null(b)) {
      if (is_window(r.algorithm)) {
        fail(b, "burst: only for token_bucket and gcra (algorithm " +
                    std::string(to_string(r.algorithm)) + " counts requests_per_unit per unit)");
      }
      r.burst = unsigned_field(b, "burst", max_capacity);
      if (*r.burst < 1) fail(b, "burst: must be at least 1");
    }
    if (const YAML::Node t = field(rl, "lease_ttl"); !is_null(t)) {
      const std::string text = string_field(rl, "lease_ttl");
      std::string why;
      const auto d = text == "0" ? std::optional<std::chrono::milliseconds>(0)
                                 : http::parse_duration(text, &why);
      if (!d) fail(t, "lease_ttl: " + why + ", or 0 for no leases");
      if (*d > max_lease_ttl) fail(t, "lease_ttl: at most 1h, not " + text);
      r.lease_ttl = *d;
    }
    if (r.unlimited) {
      if (explicit_algorithm || r.burst || r.lease_ttl.count() > 0) {
        fail(rl, "algorithm, burst and lease_ttl have no meaning on an unlimited rate_limit");
      }
      return r;
    }
    if (r.requests_per_unit == 0) return r;  // never admits: no policy to check
    r.policy = make_policy(rl, r, explicit_algorithm);
    return r;
  }

  std::uint64_t unsigned_field(const YAML::Node& v, std::string_view name,
                               std::uint64_t max) const {
    if (v.IsScalar() && kind_of(v) == scalar_kind::integer) {
      const auto parsed = parse_go_int(v.Scalar());
      if (parsed && *parsed >= 0 && static_cast<std::uint64_t>(*parsed) <= max) {
        return static_cast<std::uint64_t>(*parsed);
      }
    }
    fail(v, std::string(name) + ": must be a whole number from 0 to " + std::to_string(max) +
                ", not " + show(v));
  }

  sluice::policy make_policy(const YAML::Node& at, const rls_rate_limit& r,
                             bool explicit_algorithm) const {
    sluice::policy p;
    p.algorithm = r.algorithm;
    p.lease_ttl = r.lease_ttl;
    const auto window = unit_window(r.unit);
    if (is_window(r.algorithm)) {
      p.limit = r.requests_per_unit;
      // A reference file must load: its default fixed window counts at most max_capacity
      // per unit (10^9, far above anything a single key sees). Asked for explicitly, a
      // bigger limit is refused below instead.
      if (!explicit_algorithm && p.limit > max_capacity) p.limit = max_capacity;
      p.window = window;
    } else {
      p.capacity = r.burst.value_or(r.requests_per_unit);
      p.refill_per_second =
          static_cast<double>(r.requests_per_unit) / std::chrono::duration<double>(window).count();
    }
    if (const auto ec = validate(p)) {
      std::ostringstream msg;
      msg << "rate_limit: " << r.requests_per_unit << " per " << to_string(r.unit) << " with "
          << to_string(p.algorithm);
      if (!is_window(p.algorithm)) {
        msg << " (burst " << p.capacity << ", refill " << p.refill_per_second << "/s)";
      }
      msg << " is not a valid Sluice policy: " << ec.message();
      fail(at, msg.str());
    }
    return p;
  }

  // The reference turns metadata keys into strings with Go's %v after yaml.v2 resolved
  // them: `on:` becomes "true", `0x10:` "16", `~:` "<nil>".
  static std::string metadata_key(const YAML::Node& k) {
    if (!k.IsScalar()) return show(k);
    switch (kind_of(k)) {
      case scalar_kind::null:
        return "<nil>";
      case scalar_kind::boolean:
        return (k.Tag() == "?" ? in(k.Scalar(), true_words) : k.as<bool>()) ? "true" : "false";
      case scalar_kind::integer:
        if (const auto v = parse_go_int(k.Scalar())) return std::to_string(*v);
        return k.Scalar();
      default:
        return k.Scalar();
    }
  }

  void to_json(const YAML::Node& n, std::string& out, int depth) const {
    check_depth(n, depth);
    if (n.IsMap()) {
      // One member per key: a repeated key keeps its last value (yaml.v2), a merged key
      // (`<<`) only fills what the mapping does not set itself.
      std::vector<std::pair<std::string, YAML::Node>> members;
      const auto put = [&](std::string key, const YAML::Node& v, bool replace) {
        for (auto& m : members) {
          if (m.first != key) continue;
          if (replace) m.second.reset(v);
          return;
        }
        members.emplace_back(std::move(key), v);
      };
      for (const auto& kv : n) {
        if (!is_merge_key(kv.first)) put(metadata_key(kv.first), kv.second, true);
      }
      for (const auto& kv : n) {
        if (!is_merge_key(kv.first)) continue;
        for (const auto& merged : merge_sources(kv.second)) {
          for (const auto& m : merged) put(metadata_key(m.first), m.second, false);
        }
      }
      out += '{';
      bool first = true;
      for (const auto& [key, value] : members) {
        if (!first) out += ',';
        first = false;
        json_string(out, key);
        out += ':';
        to_json(value, out, depth + 1);
      }
      out += '}';
    } else if (n.IsSequence()) {
      out += '[';
      bool first = true;
      for (const auto& e : n) {
        if (!first) out += ',';
        first = false;
        to_json(e, out, depth + 1);
      }
      out += ']';
    } else if (!n.IsScalar()) {
      out += "null";
    } else {
      switch (kind_of(n)) {
        case scalar_kind::null:
          out += "null";
          break;
        case scalar_kind::boolean:
          out += (n.Tag() == "?" ? in(n.Scalar(), true_words) : n.as<bool>()) ? "true" : "false";
          break;
        case scalar_kind::integer:
          if (const auto v = parse_go_int(n.Scalar())) {
            out += std::to_string(*v);
          } else {
            json_string(out, n.Scalar());
          }
          break;
        case scalar_kind::floating: {
          double v = 0;
          try {
            v = n.as<double>();
          } catch (const YAML::Exception&) {
            v = std::nan("");
          }
          if (std::isfinite(v)) {
            std::ostringstream s;
            s.precision(17);
            s << v;
            out += s.str();
          } else {
            json_string(out, n.Scalar());  // JSON has no inf / nan
          }
          break;
        }
        case scalar_kind::string:
          json_string(out, n.Scalar());
          break;
      }
    }
  }

  rls_config& config_;
  const rls_load_options& options_;
  std::string file_;
  // Per domain, the composites of its top level, across files (merge_domains).
  std::map<std::string, std::set<std::string>> composites_;
};

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw load_failure{rls_config_error{path.string(), 0, "cannot read the file"}};
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw load_failure{rls_config_error{path.string(), 0, "cannot read the file"}};
  return text.str();
}

bool is_yaml_name(const std::filesystem::path& p) {
  const std::string name = p.filename().string();
  // Kubernetes mounts a ConfigMap with "..data" and "..2024_..." entries beside the files.
  if (name.empty() || name.front() == '.') return false;
  const std::string ext = p.extension().string();
  return ext == ".yaml" || ext == ".yml";
}

}  // namespace

std::string_view to_string(rls_unit u) noexcept {
  for (const auto& row : unit_table) {
    if (row.unit == u) return row.name;
  }
  return "UNKNOWN";
}

std::optional<rls_unit> parse_unit(std::string_view s) noexcept {
  for (const auto& row : unit_table) {
    if (iequals(s, row.name)) return row.unit;
  }
  return std::nullopt;
}

std::chrono::milliseconds unit_window(rls_unit u) noexcept {
  for (const auto& row : unit_table) {
    if (row.unit == u) return std::chrono::seconds(row.seconds);
  }
  return std::chrono::milliseconds{0};
}

const rls_domain* rls_config::find(std::string_view name) const {
  const auto it = domains.find(name);
  return it == domains.end() ? nullptr : &it->second;
}

std::string rls_config_error::what() const {
  std::string s = file;
  if (line > 0) {
    s += ':';
    s += std::to_string(line);
  }
  s += ": ";
  s += message;
  return s;
}

rls_load_result parse_rls_config(const std::vector<rls_source>& sources,
                                 const rls_load_options& options) {
  rls_config config;
  try {
    loader l(config, options);
    for (const auto& source : sources) l.load(source);
  } catch (const load_failure& f) {
    return f.error;
  }
  return config;
}

rls_load_result load_rls_config(const std::vector<std::string>& paths,
                                const rls_load_options& options) {
  std::vector<rls_source> sources;
  try {
    for (const auto& path : paths) {
      std::error_code ec;
      const std::filesystem::path p(path);
      if (std::filesystem::is_directory(p, ec)) {
        std::vector<std::filesystem::path> files;
        for (std::filesystem::directory_iterator it(p, ec), end; !ec && it != end;
             it.increment(ec)) {
          std::error_code file_ec;
          if (is_yaml_name(it->path()) && it->is_regular_file(file_ec)) files.push_back(it->path());
        }
        if (ec) return rls_config_error{path, 0, "cannot list the directory: " + ec.message()};
        std::sort(files.begin(), files.end());
        for (const auto& f : files) sources.push_back({f.string(), read_file(f)});
      } else if (std::filesystem::exists(p, ec)) {
        sources.push_back({path, read_file(p)});
      } else {
        return rls_config_error{path, 0, "no such file or directory"};
      }
    }
  } catch (const load_failure& f) {
    return f.error;
  }
  return parse_rls_config(sources, options);
}

}  // namespace sluice::envoy
