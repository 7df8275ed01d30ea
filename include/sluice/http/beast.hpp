#pragma once
/// Boost.Beast adapter (header-only): request facts from a Beast request and the
/// middleware's answer applied to a Beast response. Include only where Beast is used.
#include <string>
#include <string_view>
#include <utility>

#include <boost/asio/ip/address.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include <sluice/http/headers.hpp>
#include <sluice/http/request.hpp>

namespace sluice::http::beast {

/// Request facts for `req` received from `peer`. The header lookup refers to `req` by
/// reference (joins repeated fields with ", "): `req` must outlive evaluate() /
/// the async_evaluate() call (and enter_concurrency() / the async_enter_concurrency()
/// call), which is all the middleware needs. With concurrency rules, keep the gate_pass
/// until the response's async_write completes (examples/beast/main.cpp).
template <class Body, class Fields>
request_facts make_request_facts(const boost::beast::http::request<Body, Fields>& req,
                                 const boost::asio::ip::address& peer) {
  request_facts f;
  f.peer = peer.to_string();
  f.method = std::string(req.method_string());
  std::string_view target(req.target().data(), req.target().size());
  f.path = std::string(target.substr(0, target.find('?')));
  if (auto it = req.find(boost::beast::http::field::host); it != req.end()) {
    f.host = std::string(it->value());
  }
  f.headers = [&req](std::string_view name) -> std::optional<std::string> {
    auto range = req.equal_range(boost::beast::string_view(name.data(), name.size()));
    if (range.first == range.second) return std::nullopt;
    std::string joined;
    for (auto it = range.first; it != range.second; ++it) {
      if (!joined.empty()) joined += ", ";
      joined.append(it->value().data(), it->value().size());
    }
    return joined;
  };
  return f;
}

/// Adds `fields` to `msg` (a response header or message), replacing earlier values.
template <class Fields>
void set_headers(boost::beast::http::header<false, Fields>& msg,
                 const std::vector<header_field>& fields) {
  for (const auto& h : fields) msg.set(h.name, h.value);
}

/// The complete denial for `r` (r.allowed must be false): status, rate-limit headers,
/// problem+json body, keep-alive as requested by `req`.
template <class Body, class Fields>
boost::beast::http::response<boost::beast::http::string_body> make_denial(
    const boost::beast::http::request<Body, Fields>& req, const rate_limit_response& r) {
  boost::beast::http::response<boost::beast::http::string_body> res{
      static_cast<boost::beast::http::status>(r.status), req.version()};
  set_headers(res, r.headers);
  res.set(boost::beast::http::field::content_type,
          boost::beast::string_view(problem_content_type.data(), problem_content_type.size()));
  res.keep_alive(req.keep_alive());
  res.body() = r.body;
  res.prepare_payload();
  return res;
}

}  // namespace sluice::http::beast
