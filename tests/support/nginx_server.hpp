#pragma once
/// A real nginx (Debian package) for integration tests: a generated config in a temporary
/// directory, run in the foreground as a child process on a free loopback port
/// (`nginx -p DIR -c nginx.conf -e DIR/error.log -g 'daemon off;'`), with its pid file,
/// logs and temp paths in that directory. Killed when destroyed. Not thread-safe.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "support/process_child.hpp"

namespace sluice::test {

/// The nginx binary (found at configure time), or "" when none is installed.
std::string nginx_path();

class nginx_server {
 public:
  /// `server_block(port, dir)` returns the text of one `server { ... }` block (listening on
  /// 127.0.0.1:port); it is placed inside `http { }` after the temp paths and logs. The
  /// directory has `html/index.html` ("hello\n") for a static location. Throws
  /// std::runtime_error with nginx's error log when it does not start.
  explicit nginx_server(
      const std::function<std::string(std::uint16_t port, const std::string& dir)>& server_block);
  ~nginx_server();
  nginx_server(const nginx_server&) = delete;
  nginx_server& operator=(const nginx_server&) = delete;

  std::uint16_t port() const noexcept { return port_; }
  const std::string& dir() const noexcept { return dir_; }
  /// The whole nginx.conf written.
  std::string config_text() const;
  std::string error_log() const;

 private:
  std::string dir_;
  std::uint16_t port_ = 0;
  std::unique_ptr<process_child> child_;
};

}  // namespace sluice::test
