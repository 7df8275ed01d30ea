#pragma once
/// A TCP server on a free 127.0.0.1 port that accepts every connection and never reads,
/// writes or closes it: what a hung server or a silently dropping network looks like to a
/// client. Connections are closed when the object is destroyed. Thread-safe accessors.
#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

namespace sluice::test {

class black_hole_server {
 public:
  /// Listens and starts accepting on a background thread. Throws std::runtime_error.
  black_hole_server();
  ~black_hole_server();
  black_hole_server(const black_hole_server&) = delete;
  black_hole_server& operator=(const black_hole_server&) = delete;

  std::uint16_t port() const noexcept { return port_; }
  /// "redis://127.0.0.1:<port>"
  std::string url() const;
  /// Connections accepted so far.
  std::size_t accepted() const noexcept { return accepted_.load(); }

 private:
  void run();
  int listen_fd_ = -1;
  int wake_fd_[2] = {-1, -1};  // a pipe: writing to it stops the accept loop
  std::uint16_t port_ = 0;
  std::atomic<std::size_t> accepted_{0};
  std::thread thread_;
};

}  // namespace sluice::test
