#pragma once
/// Which backend a URL names, read from its scheme: the one place a backend URL's scheme is
/// interpreted (limiter::from_url, make_redis_backend, the CLI and sluiced all ask here).
#include <optional>
#include <string_view>

namespace sluice {

enum class backend_kind {
  memory,          ///< `memory`
  redis,           ///< `redis://`, `rediss://`: one server
  redis_cluster,   ///< `redis+cluster://`, `rediss+cluster://`
  redis_sentinel,  ///< `redis+sentinel://`, `rediss+sentinel://`: a master Sentinel names
};

struct backend_scheme {
  backend_kind kind = backend_kind::memory;
  bool tls = false;  ///< a `rediss` scheme

  friend bool operator==(const backend_scheme&, const backend_scheme&) = default;
};

/// The backend `url` names by its scheme (case-sensitive, as written in the docs), or
/// std::nullopt when it names none. Says nothing about the rest of the URL: the backend's
/// own parser checks that.
std::optional<backend_scheme> parse_backend_scheme(std::string_view url) noexcept;

}  // namespace sluice
