#pragma once
// Which items of one call share a key, in one pass: a call of n items costs O(n) whatever
// its keys. (A pairwise scan let one ShouldRateLimit of 100,000 descriptors burn 15 s of
// CPU.) A handful of items, the usual call, is scanned without a hash table.
#include <cstddef>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace sluice::detail {

/// The distinct keys of n items, numbered in order of first appearance.
struct key_groups {
  std::vector<std::size_t> group;  ///< per item: its key's number
  std::vector<std::size_t> first;  ///< per key: the first item with it
  std::vector<std::size_t> count;  ///< per key: how many items have it
};

/// Groups items 0..n-1 by `key_of(i)` (a std::string_view that outlives the call).
template <class KeyOf>
key_groups group_keys(std::size_t n, KeyOf&& key_of) {
  key_groups g;
  g.group.resize(n);
  auto add = [&](std::size_t i, std::size_t k) {
    if (k == g.first.size()) {
      g.first.push_back(i);
      g.count.push_back(0);
    }
    g.group[i] = k;
    ++g.count[k];
  };
  constexpr std::size_t scan_up_to = 8;  // at most 28 comparisons
  if (n <= scan_up_to) {
    for (std::size_t i = 0; i < n; ++i) {
      const std::string_view key = key_of(i);
      std::size_t k = 0;
      while (k < g.first.size() && std::string_view(key_of(g.first[k])) != key) ++k;
      add(i, k);
    }
    return g;
  }
  std::unordered_map<std::string_view, std::size_t> seen;
  seen.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    const auto [it, fresh] = seen.try_emplace(std::string_view(key_of(i)), g.first.size());
    add(i, it->second);
  }
  return g;
}

}  // namespace sluice::detail
