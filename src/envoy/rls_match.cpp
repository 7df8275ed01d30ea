// Descriptor matching as the reference service (envoyproxy/ratelimit): GetLimit in
// src/config/config_impl.go for one descriptor, and the service's pass over a request that
// drops unlimited and replaced limits.
#include "envoy/rls_match.hpp"

#include <set>
#include <string_view>

namespace sluice::envoy {

namespace {

// True when `value` matches `pattern`, where each `*` stands for any run of characters
// (none included): the literal pieces must appear in order, the first at the start and the
// last at the end.
bool glob_match(std::string_view pattern, std::string_view value) {
  const auto star = pattern.find('*');
  if (star == std::string_view::npos) return pattern == value;
  const std::string_view head = pattern.substr(0, star);
  const auto last_star = pattern.rfind('*');
  const std::string_view tail = pattern.substr(last_star + 1);
  if (value.size() < head.size() + tail.size()) return false;
  if (!value.starts_with(head) || !value.ends_with(tail)) return false;
  if (last_star == star) return true;  // one star: head and tail were all there was
  std::string_view rest = value.substr(head.size(), value.size() - head.size() - tail.size());
  // The pieces between the first and the last star, each found after the one before.
  std::string_view middle = pattern.substr(star + 1, last_star - star - 1);
  while (true) {
    const auto next = middle.find('*');
    const std::string_view piece = middle.substr(0, next);
    if (!piece.empty()) {
      const auto at = rest.find(piece);
      if (at == std::string_view::npos) return false;
      rest.remove_prefix(at + piece.size());
    }
    if (next == std::string_view::npos) break;
    middle.remove_prefix(next + 1);
  }
  return true;
}

// How a request entry found its config node at one level.
enum class found_by { exact, wildcard, key_only };

struct step {
  const rls_descriptor_config* node;
  found_by how;
};

// Looks up one request entry in one level of the tree: the exact value, else the first
// wildcard (config order) that matches, else the key-only descriptor.
std::optional<step> lookup(const std::vector<rls_descriptor_config>& level,
                           const rls_level_index& index, const rls_entry& entry) {
  const auto k = index.keys.find(entry.key);
  if (k == index.keys.end()) return std::nullopt;
  const auto& by_key = k->second;
  if (const auto v = by_key.values.find(entry.value); v != by_key.values.end()) {
    return step{&level[v->second], found_by::exact};
  }
  for (const std::size_t w : by_key.wildcards) {
    if (glob_match(level[w].value, entry.value)) return step{&level[w], found_by::wildcard};
  }
  if (by_key.key_only) return step{&level[*by_key.key_only], found_by::key_only};
  return std::nullopt;
}

void escape_into(std::string& out, std::string_view s) {
  constexpr char hex[] = "0123456789ABCDEF";
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    const bool plain = (u >= 'A' && u <= 'Z') || (u >= 'a' && u <= 'z') || (u >= '0' && u <= '9') ||
                       c == '.' || c == '_' || c == '~' || c == '*' || c == '/' || c == '-';
    if (plain) {
      out += c;
    } else {
      out += '%';
      out += hex[u >> 4];
      out += hex[u & 15];
    }
  }
}

// The reference's key for an override's stats: "domain.key_value.key2" (no "_" when a value
// is empty).
std::string override_metric_key(std::string_view domain, std::span<const rls_entry> entries) {
  std::string key(domain);
  key += '.';
  bool first = true;
  for (const auto& e : entries) {
    if (!first) key += '.';
    first = false;
    key += e.key;
    if (!e.value.empty()) {
      key += '_';
      key += e.value;
    }
  }
  return key;
}

rls_match match_override(std::string_view domain, const rls_descriptor& d,
                         const rls_match_options& options) {
  rls_match m;
  const rls_override& o = *d.limit;
  m.from_override = true;
  m.requests_per_unit = o.requests_per_unit;
  m.unit = o.unit;
  m.metric_key = override_metric_key(domain, d.entries);
  const auto window = unit_window(o.unit);
  if (window.count() == 0) {
    m.error = "the descriptor's limit override has unit UNKNOWN";
    return m;
  }
  m.matched = true;
  m.policy.algorithm = algorithm::fixed_window;
  m.policy.limit = std::min<std::uint64_t>(o.requests_per_unit, max_capacity);
  m.policy.window = window;
  m.bucket_key = bucket_key(domain, d.entries, m.policy.algorithm, window, options.tag);
  return m;
}

// One descriptor against the domain's tree (GetLimit without the override branch).
rls_match match_tree(std::string_view domain, const rls_domain& root, const rls_descriptor& d,
                     const rls_match_options& options) {
  rls_match m;
  const auto& entries = d.entries;
  if (entries.empty()) return m;
  const std::vector<rls_descriptor_config>* level = &root.descriptors;
  const rls_level_index* index = &root.index;
  std::vector<step> path;
  path.reserve(entries.size());
  const rls_descriptor_config* limit_node = nullptr;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const auto found = lookup(*level, *index, entries[i]);
    if (!found) break;
    path.push_back(*found);
    const rls_descriptor_config* node = found->node;
    // A limit applies only where the request ends: a request deeper than the config, or one
    // that stops above the limit, matches nothing.
    if (node->rate_limit && i + 1 == entries.size()) limit_node = node;
    if (node->descriptors.empty()) break;
    level = &node->descriptors;
    index = &node->index;
  }
  if (limit_node == nullptr) return m;

  const rls_rate_limit& rl = *limit_node->rate_limit;
  m.config = limit_node;
  m.name = rl.name;
  m.requests_per_unit = rl.requests_per_unit;
  m.unit = rl.unit;
  m.shadow_mode = limit_node->shadow_mode;
  m.quota_mode = limit_node->quota_mode;
  m.unlimited = rl.unlimited;

  // Every level matched (the limit is at the last entry), so path[i] belongs to entries[i].
  // share_threshold at a wildcard level: every matching value shares the pattern's bucket.
  auto shared_value = [&](std::size_t i) -> const std::string* {
    const step& s = path[i];
    if (s.how == found_by::wildcard && s.node->share_threshold) return &s.node->value;
    return nullptr;
  };

  // The metric key, as the reference names the limit's stats.
  std::string metric(domain);
  if (limit_node->detailed_metric) {
    bool any_shared = false;
    for (std::size_t i = 0; i < entries.size(); ++i) any_shared = any_shared || shared_value(i);
    for (std::size_t i = 0; i < entries.size(); ++i) {
      metric += '.';
      metric += entries[i].key;
      if (const std::string* shared = shared_value(i)) {
        metric += '_';
        metric += *shared;
      } else if (!any_shared || !entries[i].value.empty()) {
        // Plain detailed metrics always write "key_value" (also "key_" for an empty value);
        // next to a shared pattern the reference leaves the "_" out for empty values.
        metric += '_';
        metric += entries[i].value;
      }
    }
  } else {
    for (std::size_t i = 0; i < entries.size(); ++i) {
      const step& s = path[i];
      metric += '.';
      metric += entries[i].key;
      std::string_view value;
      switch (s.how) {
        case found_by::wildcard:
          if (s.node->share_threshold || !s.node->value_to_metric) {
            value = s.node->value;
          } else {
            value = entries[i].value;
          }
          break;
        case found_by::exact:
          value = entries[i].value;
          break;
        case found_by::key_only:
          if (s.node->value_to_metric) value = entries[i].value;
          break;
      }
      if (!value.empty()) {
        metric += '_';
        metric += value;
      }
    }
  }
  m.metric_key = std::move(metric);

  if (rl.unlimited) return m;
  if (rl.requests_per_unit == 0) {
    m.matched = true;  // a limit nothing fits: OVER_LIMIT without asking a backend
    return m;
  }
  m.matched = true;
  m.policy = rl.policy;
  std::vector<rls_entry> keyed;
  keyed.reserve(entries.size());
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const std::string* shared = shared_value(i);
    keyed.push_back({entries[i].key, shared ? *shared : entries[i].value});
  }
  const auto window = is_window(m.policy.algorithm) ? m.policy.window : unit_window(rl.unit);
  m.bucket_key = bucket_key(domain, keyed, m.policy.algorithm, window, options.tag);
  return m;
}

}  // namespace

std::string bucket_key(std::string_view domain, std::span<const rls_entry> entries,
                       sluice::algorithm algorithm, std::chrono::milliseconds window,
                       rls_key_tag tag) {
  std::string key = "rls:";
  if (tag == rls_key_tag::domain) key += '{';
  escape_into(key, domain);
  if (tag == rls_key_tag::domain) key += '}';
  for (const auto& e : entries) {
    key += ':';
    escape_into(key, e.key);
    key += '=';
    escape_into(key, e.value);
  }
  key += ':';
  key += to_string(algorithm);
  key += ':';
  key += std::to_string(window.count());
  return key;
}

std::vector<rls_match> match_descriptors(const rls_config& config, std::string_view domain,
                                         std::span<const rls_descriptor> descriptors,
                                         const rls_match_options& options) {
  std::vector<rls_match> out(descriptors.size());
  const rls_domain* root = config.find(domain);
  if (root == nullptr) return out;
  for (std::size_t i = 0; i < descriptors.size(); ++i) {
    const auto& d = descriptors[i];
    out[i] = d.limit ? match_override(domain, d, options) : match_tree(domain, *root, d, options);
  }
  // The service's replaces pass: the names every matched, limited descriptor replaces (an
  // unlimited one replaces nothing; a replaced one still does), then drop the named ones.
  std::set<std::string, std::less<>> replaced;
  for (const auto& m : out) {
    if (m.config != nullptr && !m.unlimited) {
      replaced.insert(m.config->rate_limit->replaces.begin(), m.config->rate_limit->replaces.end());
    }
  }
  if (!replaced.empty()) {
    for (auto& m : out) {
      if (m.matched && !m.name.empty() && replaced.contains(m.name)) {
        m.matched = false;
        m.replaced = true;
        m.bucket_key.clear();
        m.policy = {};
      }
    }
  }
  return out;
}

}  // namespace sluice::envoy
