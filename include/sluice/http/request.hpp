#pragma once
/// What the middleware needs to know about one HTTP request, independent of the server
/// framework: the direct peer, method, path, host and a case-insensitive header lookup.
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sluice::http {

/// Looks up a request header by name, case-insensitively. Returns std::nullopt when the
/// header is absent. When a header occurs more than once the values must be joined with
/// ", " in the order received (RFC 9110 §5.3), which matters for `X-Forwarded-For` and
/// `Forwarded`.
using header_lookup = std::function<std::optional<std::string>(std::string_view name)>;

/// A small owning header collection with case-insensitive lookup, for callers that do not
/// have a framework's header map at hand (tests, forward-auth translation).
class header_map {
 public:
  header_map() = default;
  header_map(std::initializer_list<std::pair<std::string, std::string>> fields);

  /// Adds a field; a repeated name is joined to the earlier value with ", ".
  void add(std::string_view name, std::string_view value);
  /// Replaces every earlier value of `name`.
  void set(std::string_view name, std::string_view value);
  /// The value of `name` (case-insensitive), or std::nullopt.
  std::optional<std::string> get(std::string_view name) const;
  /// A header_lookup reading this map; the map must outlive every use of the lookup.
  header_lookup lookup() const;

 private:
  std::vector<std::pair<std::string, std::string>> fields_;
};

/// Facts about one request. Plain data; the `headers` lookup is called only during
/// key derivation, i.e. before evaluate() / async_evaluate() return, so it may refer to
/// the framework's request object by reference.
struct request_facts {
  /// The address of the direct TCP peer, as text (`192.0.2.1`, `2001:db8::1`, with or
  /// without a port or brackets). Forwarding headers are only believed when this address
  /// is a trusted proxy.
  std::string peer;
  std::string method;  ///< e.g. `GET`; compared case-insensitively with rule methods
  /// The path; a query string (from `?` on) is ignored if present, and the path is
  /// normalized (see normalize_path()) before rules match or key on it.
  std::string path;
  std::string host;       ///< the `Host` (or `:authority`); may carry a port
  header_lookup headers;  ///< may be empty: then no header is present
};

/// The path that rules match and `path` keys use, normalized so that spellings a server
/// treats as the same resource cannot slip past a rule: the query and fragment are dropped,
/// an absolute-form target (`http://host/x`) loses its scheme and authority, `%XX` escapes of
/// unreserved characters are decoded (`/%6Cogin` -> `/login`) and other escapes get upper-case
/// hex, a `%` that starts no escape becomes `%25`, repeated slashes are merged, and `.` / `..`
/// segments are resolved (RFC 3986 §5.2.4, never above the root). The result always starts
/// with `/` and is its own normal form.
std::string normalize_path(std::string_view target);

}  // namespace sluice::http
