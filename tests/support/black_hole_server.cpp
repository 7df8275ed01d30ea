#include "support/black_hole_server.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fcntl.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace sluice::test {

black_hole_server::black_hole_server() {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listen_fd_, 128) != 0 ||
      ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0 ||
      ::pipe2(wake_fd_, O_CLOEXEC) != 0) {
    const int err = errno;
    ::close(listen_fd_);
    throw std::runtime_error(std::string("black_hole_server: ") + std::strerror(err));
  }
  port_ = ntohs(addr.sin_port);
  thread_ = std::thread([this] { run(); });
}

black_hole_server::~black_hole_server() {
  const char stop = 1;
  [[maybe_unused]] auto n = ::write(wake_fd_[1], &stop, 1);
  thread_.join();
  ::close(wake_fd_[0]);
  ::close(wake_fd_[1]);
  ::close(listen_fd_);
}

std::string black_hole_server::url() const { return "redis://127.0.0.1:" + std::to_string(port_); }

void black_hole_server::run() {
  std::vector<int> held;
  for (;;) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_[0], POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[1].revents) break;
    if (fds[0].revents & POLLIN) {
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) {
        held.push_back(fd);  // held open, never read: requests pile up unanswered
        accepted_.fetch_add(1);
      }
    }
  }
  for (int fd : held) ::close(fd);
}

}  // namespace sluice::test
