#include "support/sentinel_fixture.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "redis/resp.hpp"
#include "support/loopback.hpp"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string info_field(const std::string& info, const std::string& field) {
  std::istringstream in(info);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.starts_with(field + ":")) return line.substr(field.size() + 1);
  }
  return {};
}

// SENTINEL get-master-addr-by-name: the port, or 0 when the sentinel does not know.
std::uint16_t ask_master_port(std::uint16_t sentinel, const char* name,
                              const std::string& password) {
  redis_client c(sentinel, 500ms, password);
  auto r = c.command({"SENTINEL", "get-master-addr-by-name", name});
  if (r->type != REDIS_REPLY_ARRAY || r->elements != 2) return 0;
  return static_cast<std::uint16_t>(std::stoi(std::string(redis::reply_text(*r->element[1]))));
}

}  // namespace

sentinel_process::sentinel_process(const std::string& dir, const std::string& name,
                                   std::uint16_t master_port, sentinel_group_options options)
    : dir_(dir), name_(name), master_port_(master_port), options_(std::move(options)) {
  std::string why;
  for (int attempt = 0; attempt < 5; ++attempt) {
    port_ = free_loopback_port();
    if (options_.tls) tls_port_ = free_loopback_port();
    if (spawn_and_wait(why)) return;
  }
  throw std::runtime_error("redis-sentinel did not start: " + why);
}

sentinel_process::~sentinel_process() { kill(); }

bool sentinel_process::spawn_and_wait(std::string& why) {
  const std::string base = dir_ + "/sentinel-" + std::to_string(port_);
  {
    std::ofstream conf(base + ".conf");
    conf << "port " << port_ << "\nbind 127.0.0.1\ndaemonize no\ndir " << dir_ << "\nlogfile "
         << base << ".log\nsentinel monitor " << name_ << " 127.0.0.1 " << master_port_
         << " 2\nsentinel down-after-milliseconds " << name_ << " 1000\n"
         << "sentinel failover-timeout " << name_ << " 5000\nsentinel parallel-syncs " << name_
         << " 1\n";
    if (!options_.sentinel_password.empty()) {
      conf << "requirepass " << options_.sentinel_password << "\nsentinel sentinel-pass "
           << options_.sentinel_password << "\n";
    }
    if (!options_.master_password.empty())
      conf << "sentinel auth-pass " << name_ << " " << options_.master_password << "\n";
    if (const auto& t = options_.tls) {
      // tls-replication: the sentinel reaches the data nodes and the other sentinels over
      // TLS too (and announces its TLS port to them).
      conf << "tls-port " << tls_port_ << "\ntls-cert-file " << t->cert << "\ntls-key-file "
           << t->key << "\ntls-ca-cert-file " << t->ca << "\ntls-auth-clients no\n"
           << "tls-replication yes\n";
    }
  }
  std::string conf_path = base + ".conf";
  std::string prog = "redis-sentinel";
  char* argv[] = {prog.data(), conf_path.data(), nullptr};
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    why = std::string("fork: ") + std::strerror(errno);
    return false;
  }
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    const int devnull = ::open("/dev/null", O_RDWR);
    if (devnull >= 0) {
      ::dup2(devnull, 0);
      ::dup2(devnull, 1);
      ::dup2(devnull, 2);
    }
    ::execvp("redis-sentinel", argv);
    ::_exit(127);
  }
  pid_ = pid;
  const auto until = clock_type::now() + 10s;
  while (clock_type::now() < until) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      why = "redis-sentinel exited at start-up: " + read_file(base + ".log");
      return false;
    }
    try {
      redis_client c(port_, 200ms, options_.sentinel_password);
      if (c.command({"PING"})) return true;
    } catch (const std::exception&) {
    }
    std::this_thread::sleep_for(10ms);
  }
  kill();
  why = "redis-sentinel did not answer PING: " + read_file(base + ".log");
  return false;
}

void sentinel_process::kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
}

redis_sentinel_group::redis_sentinel_group(int sentinels, sentinel_group_options options)
    : options_(std::move(options)) {
  char tmpl[] = "/tmp/sluice-sentinel-XXXXXX";
  if (!::mkdtemp(tmpl)) throw std::runtime_error(std::string("mkdtemp: ") + std::strerror(errno));
  dir_ = tmpl;
  std::vector<std::string> auth;
  if (!options_.master_password.empty())
    auth = {"--requirepass", options_.master_password, "--masterauth", options_.master_password};
  const auto start_data_node = [&](std::vector<std::string> args) {
    if (!options_.tls) return std::make_unique<redis_server>(std::move(args));
    auto files = *options_.tls;
    files.plain_port_too = true;
    args.insert(args.end(), {"--tls-replication", "yes"});
    return std::make_unique<redis_server>(files, std::move(args));
  };
  data_.push_back(start_data_node(auth));
  // With TLS the master is known by its TLS port, to the replica and the sentinels alike.
  const auto master = options_.tls ? data_[0]->tls_port() : data_[0]->port();
  auto replica_args = auth;
  replica_args.insert(replica_args.end(), {"--replicaof", "127.0.0.1", std::to_string(master)});
  data_.push_back(start_data_node(replica_args));
  for (int i = 0; i < sentinels; ++i)
    sentinels_.push_back(std::make_unique<sentinel_process>(dir_, master_name, master, options_));

  // Ready for a failover: the replica is in sync and every sentinel has discovered the
  // replica and the other sentinels (through the master's hello channel).
  const auto until = clock_type::now() + 30s;
  std::string last;
  for (;;) {
    bool ok = false;
    // On a loaded machine a probe can take longer than its timeout: that is "not ready yet",
    // not a failure of the test (the 30 s bound still ends the wait).
    try {
      {
        redis_client replica(data_[1]->port(), 2s, options_.master_password);
        const auto info =
            std::string(redis::reply_text(*replica.command({"INFO", "replication"})));
        ok = info_field(info, "master_link_status") == "up";
      }
      if (!ok) last = "replica not in sync";
      for (std::size_t i = 0; ok && i < sentinels_.size(); ++i) {
        redis_client c(sentinels_[i]->port(), 2s, options_.sentinel_password);
        auto replicas = c.command({"SENTINEL", "replicas", master_name});
        auto others = c.command({"SENTINEL", "sentinels", master_name});
        if (replicas->type != REDIS_REPLY_ARRAY || replicas->elements < 1 ||
            others->type != REDIS_REPLY_ARRAY || others->elements + 1 < sentinels_.size()) {
          ok = false;
          last = "sentinel " + std::to_string(i) + " has not discovered everyone yet";
        }
      }
    } catch (const std::runtime_error& e) {
      ok = false;
      last = e.what();
    }
    if (ok) return;
    if (clock_type::now() > until) throw std::runtime_error("sentinel group not ready: " + last);
    std::this_thread::sleep_for(50ms);
  }
}

redis_sentinel_group::~redis_sentinel_group() {
  sentinels_.clear();
  data_.clear();
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

std::string redis_sentinel_group::hosts() const {
  std::string h;
  for (std::size_t i = 0; i < sentinels_.size(); ++i) {
    if (i > 0) h += ",";
    h += "127.0.0.1:" +
         std::to_string(options_.tls ? sentinels_[i]->tls_port() : sentinels_[i]->port());
  }
  return h;
}

// The test passwords are plain words: no percent-encoding needed.
std::string redis_sentinel_group::url() const {
  std::string u = options_.tls ? "rediss+sentinel://" : "redis+sentinel://";
  if (!options_.master_password.empty()) u += ":" + options_.master_password + "@";
  u += hosts() + "/" + master_name;
  if (!options_.sentinel_password.empty()) u += "?sentinel_password=" + options_.sentinel_password;
  return u;
}

std::uint16_t redis_sentinel_group::master_port() const {
  for (const auto& s : sentinels_) {
    try {
      if (auto p = ask_master_port(s->port(), master_name, options_.sentinel_password)) return p;
    } catch (const std::exception&) {
    }
  }
  throw std::runtime_error("no sentinel knows the master");
}

void redis_sentinel_group::failover() {
  redis_client c(sentinels_.front()->port(), 2s, options_.sentinel_password);
  auto r = c.command({"SENTINEL", "FAILOVER", master_name});
  if (redis::is_error(*r))
    throw std::runtime_error("SENTINEL FAILOVER: " + std::string(redis::reply_text(*r)));
}

std::uint16_t redis_sentinel_group::wait_for_new_master(std::uint16_t old_port,
                                                        std::chrono::milliseconds within) {
  const auto until = clock_type::now() + within;
  for (;;) {
    std::uint16_t agreed = 0;
    bool all = true;
    for (const auto& s : sentinels_) {
      std::uint16_t p = 0;
      try {
        p = ask_master_port(s->port(), master_name, options_.sentinel_password);
      } catch (const std::exception&) {
      }
      if (p == 0 || p == old_port || (agreed != 0 && p != agreed)) {
        all = false;
        break;
      }
      agreed = p;
    }
    if (all && agreed != 0) {
      try {
        redis_client c(agreed, 500ms, options_.master_password);
        const auto info = std::string(redis::reply_text(*c.command({"INFO", "replication"})));
        if (info_field(info, "role") == "master") return agreed;
      } catch (const std::exception&) {
      }
    }
    if (clock_type::now() > until) throw std::runtime_error("no failover within the time limit");
    std::this_thread::sleep_for(50ms);
  }
}

}  // namespace sluice::test
