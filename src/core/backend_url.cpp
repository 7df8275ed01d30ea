#include <sluice/backend_url.hpp>

namespace sluice {

std::optional<backend_scheme> parse_backend_scheme(std::string_view url) noexcept {
  if (url == "memory") return backend_scheme{backend_kind::memory, false};
  const auto sep = url.find("://");
  if (sep == std::string_view::npos) return std::nullopt;
  const auto scheme = url.substr(0, sep);
  struct entry {
    std::string_view name;
    backend_scheme what;
  };
  static constexpr entry known[] = {
      {"redis", {backend_kind::redis, false}},
      {"rediss", {backend_kind::redis, true}},
      {"redis+cluster", {backend_kind::redis_cluster, false}},
      {"rediss+cluster", {backend_kind::redis_cluster, true}},
      {"redis+sentinel", {backend_kind::redis_sentinel, false}},
      {"rediss+sentinel", {backend_kind::redis_sentinel, true}},
  };
  for (const auto& e : known) {
    if (scheme == e.name) return e.what;
  }
  return std::nullopt;
}

}  // namespace sluice
