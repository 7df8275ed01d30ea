#include "support/redis_server.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>

#include "support/loopback.hpp"
#include "support/redis_client.hpp"

namespace sluice::test {
namespace {

std::string read_tail(const std::string& path, std::size_t max_bytes = 2000) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  return s.size() > max_bytes ? s.substr(s.size() - max_bytes) : s;
}

// PING over TLS with Asio and OpenSSL, without verifying the server: only "is it up".
// Bounded by `within` even if the server accepts and never answers.
bool answers_tls_ping(std::uint16_t port, const redis_tls_files& tls,
                      std::chrono::milliseconds within) {
  namespace asio = boost::asio;
  asio::io_context io;
  asio::ssl::context ctx(asio::ssl::context::tls_client);
  boost::system::error_code ec;
  if (!tls.client_cert.empty()) {
    ctx.use_certificate_chain_file(tls.client_cert, ec);
    if (!ec) ctx.use_private_key_file(tls.client_key, asio::ssl::context::pem, ec);
    if (ec) throw std::runtime_error("redis_server: client certificate: " + ec.message());
  }
  asio::ssl::stream<asio::ip::tcp::socket> s(io, ctx);
  s.set_verify_mode(asio::ssl::verify_none);
  const std::string ping = "PING\r\n";
  char reply[64];
  bool ok = false;
  s.next_layer().async_connect(
      {asio::ip::make_address("127.0.0.1"), port}, [&](boost::system::error_code e) {
        if (e) return;
        s.async_handshake(asio::ssl::stream_base::client, [&](boost::system::error_code e2) {
          if (e2) return;
          asio::async_write(s, asio::buffer(ping), [&](boost::system::error_code e3, std::size_t) {
            if (e3) return;
            s.async_read_some(asio::buffer(reply), [&](boost::system::error_code e4,
                                                       std::size_t n) { ok = !e4 && n > 0; });
          });
        });
      });
  io.run_for(within);
  // Abort what is still pending and let it finish before the stream goes away.
  s.next_layer().close(ec);
  io.restart();
  io.run();
  return ok;
}

bool answers_ping(std::uint16_t port) {
  try {
    redis_client c(port, std::chrono::milliseconds{200});
    auto r = c.command({"PING"});
    return r != nullptr;  // PONG, or NOAUTH when a password is set: either way it answers
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

redis_server::redis_server(std::vector<std::string> extra_args)
    : extra_args_(std::move(extra_args)) {
  char tmpl[] = "/tmp/sluice-redis-XXXXXX";
  if (!::mkdtemp(tmpl)) throw std::runtime_error(std::string("mkdtemp: ") + std::strerror(errno));
  dir_ = tmpl;
  std::string why;
  // The free port can be taken between probing and binding: try a few.
  for (int attempt = 0; attempt < 5; ++attempt) {
    port_ = free_loopback_port();
    if (spawn_and_wait(std::chrono::seconds{10}, why)) return;
  }
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
  throw std::runtime_error("redis-server did not start: " + why);
}

redis_server::redis_server(redis_tls_files tls, std::vector<std::string> extra_args)
    : extra_args_(std::move(extra_args)), tls_(std::move(tls)) {
  char tmpl[] = "/tmp/sluice-redis-XXXXXX";
  if (!::mkdtemp(tmpl)) throw std::runtime_error(std::string("mkdtemp: ") + std::strerror(errno));
  dir_ = tmpl;
  std::string why;
  for (int attempt = 0; attempt < 5; ++attempt) {
    tls_port_ = free_loopback_port();
    port_ = tls_->plain_port_too ? free_loopback_port() : tls_port_;
    if (spawn_and_wait(std::chrono::seconds{10}, why)) return;
  }
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
  throw std::runtime_error("redis-server (TLS) did not start: " + why);
}

redis_server::~redis_server() {
  if (pid_ > 0) signal_and_reap(SIGKILL, std::chrono::seconds{5});
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

std::string redis_server::url() const {
  return tls_ ? "rediss://127.0.0.1:" + std::to_string(tls_port_)
              : "redis://127.0.0.1:" + std::to_string(port_);
}

bool redis_server::spawn_and_wait(std::chrono::milliseconds within, std::string& why) {
  const std::string log = dir_ + "/redis.log";
  std::vector<std::string> args{"redis-server",
                                "--port",
                                tls_ && !tls_->plain_port_too ? "0" : std::to_string(port_),
                                "--bind",
                                "127.0.0.1",
                                "--save",
                                "",
                                "--appendonly",
                                "no",
                                "--dir",
                                dir_,
                                "--logfile",
                                log,
                                "--daemonize",
                                "no"};
  if (tls_) {
    args.insert(args.end(), {"--tls-port", std::to_string(tls_port_), "--tls-cert-file", tls_->cert,
                             "--tls-key-file", tls_->key, "--tls-ca-cert-file", tls_->ca,
                             "--tls-auth-clients", tls_->auth_clients ? "yes" : "no"});
  }
  args.insert(args.end(), extra_args_.begin(), extra_args_.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t parent = ::getpid();

  const pid_t pid = ::fork();
  if (pid < 0) {
    why = std::string("fork: ") + std::strerror(errno);
    return false;
  }
  if (pid == 0) {
    // Only async-signal-safe calls between fork and exec.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    const int devnull = ::open("/dev/null", O_RDWR);
    if (devnull >= 0) {
      ::dup2(devnull, 0);
      ::dup2(devnull, 1);
      ::dup2(devnull, 2);
    }
    ::execvp("redis-server", argv.data());
    ::_exit(127);
  }
  pid_ = pid;
  paused_ = false;

  const auto until = std::chrono::steady_clock::now() + within;
  while (std::chrono::steady_clock::now() < until) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      why =
          "redis-server exited at start-up (port " + std::to_string(port_) + "): " + read_tail(log);
      return false;
    }
    if (tls_ ? answers_tls_ping(tls_port_, *tls_, std::chrono::milliseconds{200})
             : answers_ping(port_))
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds{10});
  }
  signal_and_reap(SIGKILL, std::chrono::seconds{5});
  why = "redis-server did not answer PING in time: " + read_tail(log);
  return false;
}

void redis_server::start() {
  if (pid_ > 0) throw std::logic_error("redis_server::start: already running");
  std::string why;
  // The same port: a client reconnecting is the point. Right after a kill it can take a
  // moment before the port can be bound again, hence the retries.
  for (int attempt = 0; attempt < 20; ++attempt) {
    if (spawn_and_wait(std::chrono::seconds{10}, why)) return;
    std::this_thread::sleep_for(std::chrono::milliseconds{100});
  }
  throw std::runtime_error("redis-server did not restart: " + why);
}

void redis_server::stop() {
  if (pid_ > 0) signal_and_reap(SIGTERM, std::chrono::seconds{5});
}

void redis_server::kill() {
  if (pid_ > 0) signal_and_reap(SIGKILL, std::chrono::seconds{5});
}

void redis_server::restart() {
  kill();
  start();
}

void redis_server::pause() {
  if (pid_ > 0 && !paused_) {
    ::kill(pid_, SIGSTOP);
    paused_ = true;
  }
}

void redis_server::resume() {
  if (pid_ > 0 && paused_) {
    ::kill(pid_, SIGCONT);
    paused_ = false;
  }
}

void redis_server::signal_and_reap(int sig, std::chrono::milliseconds grace) {
  ::kill(pid_, sig);
  if (paused_) ::kill(pid_, SIGCONT);  // a stopped process cannot act on SIGTERM
  const auto until = std::chrono::steady_clock::now() + grace;
  int status = 0;
  while (::waitpid(pid_, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() >= until) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds{5});
  }
  pid_ = -1;
  paused_ = false;
}

}  // namespace sluice::test
