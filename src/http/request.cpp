#include <sluice/http/request.hpp>

#include "http/text.hpp"

namespace sluice::http {

header_map::header_map(std::initializer_list<std::pair<std::string, std::string>> fields) {
  for (const auto& [name, value] : fields) add(name, value);
}

void header_map::add(std::string_view name, std::string_view value) {
  for (auto& [n, v] : fields_) {
    if (detail::iequals(n, name)) {
      v += ", ";
      v += value;
      return;
    }
  }
  fields_.emplace_back(std::string(name), std::string(value));
}

void header_map::set(std::string_view name, std::string_view value) {
  for (auto& [n, v] : fields_) {
    if (detail::iequals(n, name)) {
      v = std::string(value);
      return;
    }
  }
  fields_.emplace_back(std::string(name), std::string(value));
}

std::optional<std::string> header_map::get(std::string_view name) const {
  for (const auto& [n, v] : fields_) {
    if (detail::iequals(n, name)) return v;
  }
  return std::nullopt;
}

header_lookup header_map::lookup() const {
  return [this](std::string_view name) { return get(name); };
}

}  // namespace sluice::http
