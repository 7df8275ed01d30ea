#pragma once
/// A real redis-server child process on a free loopback port, for integration tests.
///
///   sluice::test::redis_server redis;            // started, answers PING
///   auto backend = make_redis_backend(redis.url());
///   redis.kill();  redis.start();                // same port, empty data set
///   redis.pause(); redis.resume();               // SIGSTOP / SIGCONT
///
/// The server is killed when the object is destroyed (also when a test fails), and dies with
/// the thread that started it (PR_SET_PDEATHSIG), so a crashed test leaves nothing behind.
/// Not thread-safe: drive one object from one thread.
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace sluice::test {

/// Files for a TLS-only redis-server (PEM paths, e.g. from test::test_pki).
struct redis_tls_files {
  // Declared, so that this is no aggregate: {"--requirepass", "pw"} stays extra_args.
  redis_tls_files() = default;
  std::string cert, key;      ///< the server's certificate and key
  std::string ca;             ///< CA that client certificates must chain to
  bool auth_clients = false;  ///< --tls-auth-clients yes: a client certificate is required
  /// The fixture's own PING when auth_clients is set.
  std::string client_cert, client_key;
  /// Keep a plaintext port as well (port()), for fixtures that administer the server with
  /// a plain client (a cluster being joined); clients under test use tls_port().
  bool plain_port_too = false;
};

class redis_server {
 public:
  /// Starts `redis-server --port P --bind 127.0.0.1 --save '' --appendonly no` plus
  /// `extra_args` (e.g. {"--requirepass", "pw"}) and waits until it answers PING.
  /// Throws std::runtime_error (with the server's log) if it does not come up.
  explicit redis_server(std::vector<std::string> extra_args = {});
  /// The same with TLS only: `--port 0 --tls-port P` and the files; waits until it answers
  /// PING over TLS (the fixture does not verify the server).
  explicit redis_server(redis_tls_files tls, std::vector<std::string> extra_args = {});
  ~redis_server();
  redis_server(const redis_server&) = delete;
  redis_server& operator=(const redis_server&) = delete;

  /// The plaintext port; for a TLS-only server, its TLS port.
  std::uint16_t port() const noexcept { return port_; }
  /// The TLS port (0 without TLS).
  std::uint16_t tls_port() const noexcept { return tls_port_; }
  /// "redis://127.0.0.1:<port>", or "rediss://127.0.0.1:<port>" for a TLS server.
  std::string url() const;  // (TLS: with tls_port())
  bool tls() const noexcept { return tls_.has_value(); }
  /// True between start() and stop()/kill() (a paused server is running).
  bool running() const noexcept { return pid_ > 0; }
  pid_t pid() const noexcept { return pid_; }

  /// Starts the server again on the same port (after stop() or kill()); waits for PING.
  void start();
  /// SIGTERM, then waits for the exit (SIGKILL after 5 s).
  void stop();
  /// SIGKILL and reap: a crash, as far as clients can tell.
  void kill();
  /// kill() then start(): a restart that loses every key and loaded script.
  void restart();
  /// SIGSTOP: connections stay open and are accepted into the backlog, nothing answers.
  void pause();
  /// SIGCONT after pause().
  void resume();

 private:
  bool spawn_and_wait(std::chrono::milliseconds within, std::string& why);
  void signal_and_reap(int sig, std::chrono::milliseconds grace);

  std::vector<std::string> extra_args_;
  std::optional<redis_tls_files> tls_;
  std::string dir_;  // a temporary working directory holding the log
  std::uint16_t port_ = 0;
  std::uint16_t tls_port_ = 0;
  pid_t pid_ = -1;
  bool paused_ = false;
};

}  // namespace sluice::test
