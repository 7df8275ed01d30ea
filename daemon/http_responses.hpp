#pragma once
// What the endpoint files (routing.cpp, check_endpoint.cpp, admin_endpoints.cpp,
// auth_endpoint.cpp, json_endpoint.cpp, health_endpoints.cpp) share to read a request and
// write a response: Beast's string views, a plain response, JSON text, the Content-Type
// test and /v1/check's answer body. Private to the daemon.
#include <string>
#include <string_view>
#include <vector>

#include <boost/beast/core/string.hpp>
#include <boost/beast/http/field.hpp>
#include <boost/beast/http/status.hpp>
#include <nlohmann/json.hpp>

#include <sluice/decision.hpp>
#include <sluice/http/headers.hpp>

#include "service.hpp"

namespace sluice::daemon {

// Beast 1.74 speaks boost::string_view.
inline std::string_view sv(boost::beast::string_view s) { return {s.data(), s.size()}; }
inline boost::beast::string_view bsv(std::string_view s) { return {s.data(), s.size()}; }

/// The path of a request target: what precedes its query.
inline std::string_view path_of(std::string_view target) {
  return target.substr(0, target.find('?'));
}

/// A response of `status` with `body` of Content-Type `type`, never cached.
inline http_response plain(unsigned status, std::string body, std::string_view type,
                           unsigned version) {
  http_response res{static_cast<bhttp::status>(status), version};
  res.set(bhttp::field::content_type, bsv(type));
  res.set(bhttp::field::cache_control, "no-store");
  res.body() = std::move(body);
  return res;
}

/// JSON text and a newline. Strings that came from a request (a target in a 404's detail)
/// may hold bytes that are not UTF-8: they become U+FFFD instead of throwing (dump()'s
/// default).
inline std::string json_text(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

inline void add_headers(http_response& res, const std::vector<http::header_field>& fields) {
  for (const auto& f : fields) res.set(f.name, f.value);
}

/// Whether `req`'s Content-Type is application/json, parameters aside (RFC 9110 allows
/// whitespace around the parameters' ';').
inline bool is_json_content_type(const http_request& req) {
  const auto ctype = sv(req[bhttp::field::content_type]);
  auto mime = ctype.substr(0, ctype.find(';'));
  while (!mime.empty() && (mime.back() == ' ' || mime.back() == '\t')) mime.remove_suffix(1);
  while (!mime.empty() && (mime.front() == ' ' || mime.front() == '\t')) mime.remove_prefix(1);
  return boost::beast::iequals(bsv(mime), "application/json");
}

/// /v1/check's (and the admin operations') JSON answer for decision `d` under the policy
/// named `policy_name` (defined in check_endpoint.cpp).
std::string check_body(const decision& d, const std::string& policy_name);

}  // namespace sluice::daemon
