#pragma once
/// A small blocking HTTP/1.1 client for the daemon and nginx integration tests (Beast).
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace sluice::test {

struct http_reply {
  int status = 0;
  std::multimap<std::string, std::string> headers;  ///< names lower-cased
  std::string body;
  /// The first value of `name` (any case), or "" when absent.
  std::string header(const std::string& name) const;
  bool has_header(const std::string& name) const;
};

using header_list = std::vector<std::pair<std::string, std::string>>;

/// One keep-alive connection to 127.0.0.1:port. Not thread-safe.
class http_connection {
 public:
  /// Connects; throws std::runtime_error on failure.
  explicit http_connection(std::uint16_t port,
                           std::chrono::milliseconds timeout = std::chrono::seconds{10});
  ~http_connection();
  http_connection(const http_connection&) = delete;
  http_connection& operator=(const http_connection&) = delete;

  /// Sends one request and reads the reply; throws std::runtime_error on I/O errors.
  http_reply request(const std::string& method, const std::string& target,
                     const std::string& body = "", const header_list& headers = {});
  /// Writes raw bytes and reads one reply (for malformed or oversized requests).
  http_reply raw(const std::string& bytes);
  /// True when the server has closed the connection (reads EOF within `within`).
  bool closed_by_peer(std::chrono::milliseconds within);

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

/// One request on a fresh connection.
http_reply http_request(std::uint16_t port, const std::string& method, const std::string& target,
                        const std::string& body = "", const header_list& headers = {});

/// POST /v1/check with a JSON body.
http_reply post_check(std::uint16_t port, const std::string& json_body);

/// True when a TCP connection to 127.0.0.1:port is accepted.
bool port_accepts(std::uint16_t port);

}  // namespace sluice::test
