// sluiced tells systemd (Type=notify) when it is ready, reloading and stopping, over the
// socket $NOTIFY_SOCKET names, as sd_notify(3) describes: here a real unix datagram socket
// plays the service manager.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>

#include "support/daemon_http_client.hpp"
#include "support/daemon_sluiced.hpp"
#include "support/process_child.hpp"

namespace sluice::test {
namespace {

// A bound unix datagram socket; NOTIFY_SOCKET names it while this object lives.
class fake_service_manager {
 public:
  fake_service_manager() {
    path_ = make_temp_dir("sluice-notify") + "/notify.sock";
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path_.c_str(), sizeof a.sun_path - 1);
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) ADD_FAILURE() << "bind";
    timeval tv{10, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setenv("NOTIFY_SOCKET", path_.c_str(), 1);
  }
  ~fake_service_manager() {
    ::unsetenv("NOTIFY_SOCKET");
    ::close(fd_);
    ::unlink(path_.c_str());
  }
  // The next message ("" after 10 s without one).
  std::string next() {
    char buf[512];
    const auto n = ::recv(fd_, buf, sizeof buf, 0);
    return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
  }

 private:
  std::string path_;
  int fd_ = -1;
};

TEST(DaemonNotifyTest, ReadyReloadingAndStoppingReachTheServiceManager) {
  fake_service_manager systemd;
  sluiced_process d(R"(policies: {api: {capacity: 5, refill_per_second: 1}})");
  const auto ready = systemd.next();
  EXPECT_EQ(ready.rfind("READY=1\nSTATUS=serving on 127.0.0.1:", 0), 0u) << ready;
  EXPECT_EQ(http_request(d.port(), "GET", "/healthz").status, 200);

  ASSERT_TRUE(d.reload());
  EXPECT_EQ(systemd.next(), "RELOADING=1");
  EXPECT_EQ(systemd.next(), "READY=1\nSTATUS=serving; config reloaded");

  d.write_config("policies: [not, a, map]\n");
  EXPECT_FALSE(d.reload());
  EXPECT_EQ(systemd.next(), "RELOADING=1");
  EXPECT_EQ(systemd.next(), "READY=1\nSTATUS=serving; reload rejected (see the log)");

  d.process().signal(SIGTERM);
  EXPECT_EQ(systemd.next(), "STOPPING=1");
  EXPECT_EQ(d.process().wait(std::chrono::seconds{10}), 0);
}

}  // namespace
}  // namespace sluice::test
