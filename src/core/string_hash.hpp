#pragma once
// A transparent hash for maps keyed by std::string, so that a lookup by std::string_view
// builds no string: std::unordered_map<std::string, V, string_hash, std::equal_to<>>.
#include <cstddef>
#include <functional>
#include <string_view>

namespace sluice::detail {

struct string_hash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept {
    return std::hash<std::string_view>{}(s);
  }
};

}  // namespace sluice::detail
