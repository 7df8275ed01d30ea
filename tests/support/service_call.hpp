#pragma once
// One request through the daemon's service, without sockets: the unit tests' way to call an
// endpoint and read its answer.
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <boost/asio/io_context.hpp>

#include <sluice/clock.hpp>

#include "service.hpp"

namespace sluice::test {

using header_list = std::vector<std::pair<std::string, std::string>>;

/// The daemon unit tests' time source: a manual clock that moves only when a test moves it,
/// so that no decision (or latency) depends on the machine.
inline std::shared_ptr<const sluice::clock> unit_clock() {
  return std::make_shared<sluice::manual_clock>();
}

/// Sends `method target` with `headers` (each inserted, so a name may repeat) and `body`
/// from `peer` to `svc`, runs `ioc` until the answer is made, and returns it.
inline daemon::http_response call_service(daemon::service& svc, boost::asio::io_context& ioc,
                                          const std::string& method, const std::string& target,
                                          const std::string& peer, const header_list& headers,
                                          const std::string& body) {
  daemon::http_request req;
  req.method_string(method);
  req.target(target);
  req.version(11);
  for (const auto& [n, v] : headers) req.insert(n, v);
  req.body() = body;
  req.prepare_payload();
  std::optional<daemon::http_response> out;
  svc.handle(std::move(req), peer, ioc.get_executor(),
             [&](daemon::http_response r) { out = std::move(r); });
  ioc.restart();
  ioc.run();
  EXPECT_TRUE(out.has_value()) << method << " " << target << " got no answer";
  return out ? std::move(*out) : daemon::http_response{};
}

}  // namespace sluice::test
