#include "support/cluster_fixture.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
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

std::string text(const redisReply& r) { return std::string(redis::reply_text(r)); }

// "key:value" from an INFO-style reply (CLUSTER INFO, INFO replication).
std::string info_field(const std::string& info, const std::string& field) {
  std::istringstream in(info);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.starts_with(field + ":")) return line.substr(field.size() + 1);
  }
  return {};
}

// The slot ranges of a CLUSTER SLOTS reply as sorted "first-last@port/replicas" items, to
// compare what the nodes believe.
std::string slots_signature(const redisReply& r) {
  std::vector<std::string> parts;
  if (r.type != REDIS_REPLY_ARRAY) return "error";
  for (std::size_t i = 0; i < r.elements; ++i) {
    const redisReply* e = r.element[i];
    if (e->elements < 3) return "malformed";
    parts.push_back(std::to_string(e->element[0]->integer) + "-" +
                    std::to_string(e->element[1]->integer) + "@" +
                    std::to_string(e->element[2]->element[1]->integer) + "/" +
                    std::to_string(e->elements - 3));
  }
  std::sort(parts.begin(), parts.end());
  std::string out;
  for (auto& p : parts) out += p + " ";
  return out;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

redis_cluster::redis_cluster(redis_cluster_options options) : options_(options) {
  char tmpl[] = "/tmp/sluice-cluster-XXXXXX";
  if (!::mkdtemp(tmpl)) throw std::runtime_error(std::string("mkdtemp: ") + std::strerror(errno));
  log_dir_ = tmpl;
  const int total = options_.masters * (1 + options_.replicas_per_master);
  for (int i = 0; i < total; ++i) {
    // The bus port is chosen explicitly: the default (port + 10000) may not be free or
    // may not even exist for a high ephemeral port.
    std::vector<std::string> args{
        "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-port",
        std::to_string(free_loopback_port()), "--cluster-node-timeout",
        std::to_string(options_.node_timeout.count()),
        // Failover is allowed however stale the replica: tests kill masters right away.
        "--cluster-replica-validity-factor", "0",
        // The rest of the cluster keeps serving while one master's slots fail over.
        "--cluster-require-full-coverage", "no"};
    if (options_.tls) {
      // CLUSTER SLOTS then names TLS ports to TLS clients and plain ports to plain ones
      // (the fixture's), so both kinds find their way.
      args.insert(args.end(), {"--tls-cluster", "yes", "--tls-replication", "yes"});
      auto files = *options_.tls;
      files.plain_port_too = true;
      nodes_.push_back(std::make_unique<redis_server>(files, args));
    } else {
      nodes_.push_back(std::make_unique<redis_server>(args));
    }
  }
  std::string cmd = "redis-cli --cluster create";
  for (const auto& n : nodes_) cmd += " 127.0.0.1:" + std::to_string(n->port());
  cmd += " --cluster-replicas " + std::to_string(options_.replicas_per_master) +
         " --cluster-yes > " + log_dir_ + "/create.log 2>&1";
  if (std::system(cmd.c_str()) != 0)
    throw std::runtime_error("redis-cli --cluster create failed: " +
                             read_file(log_dir_ + "/create.log"));
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    auto r = client(i).command({"CLUSTER", "MYID"});
    ids_.push_back(text(*r));
  }
  wait_until_consistent(30s);
  // Replicas must be in sync before a test kills a master, or there is nothing to promote.
  const auto until = clock_type::now() + 30s;
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    for (;;) {
      auto info = text(*client(i).command({"INFO", "replication"}));
      if (info_field(info, "role") == "master" || info_field(info, "master_link_status") == "up")
        break;
      if (clock_type::now() > until)
        throw std::runtime_error("replica " + std::to_string(i) + " never synced: " + info);
      std::this_thread::sleep_for(20ms);
    }
  }
}

redis_cluster::~redis_cluster() {
  nodes_.clear();  // each redis_server kills its process
  std::error_code ignored;
  std::filesystem::remove_all(log_dir_, ignored);
}

std::string redis_cluster::url() const {
  if (options_.tls)
    return "rediss+cluster://127.0.0.1:" + std::to_string(nodes_.at(0)->tls_port()) +
           ",127.0.0.1:" + std::to_string(nodes_.at(1)->tls_port());
  return "redis+cluster://127.0.0.1:" + std::to_string(port(0)) +
         ",127.0.0.1:" + std::to_string(port(1));
}

redis_client redis_cluster::client(std::size_t i) const { return redis_client(port(i), 2s); }

std::size_t redis_cluster::index_of_port(std::uint16_t p) const {
  for (std::size_t i = 0; i < nodes_.size(); ++i)
    if (nodes_[i]->port() == p) return i;
  throw std::runtime_error("no node on port " + std::to_string(p));
}

std::size_t redis_cluster::any_live_node() const {
  for (std::size_t i = 0; i < nodes_.size(); ++i)
    if (nodes_[i]->running()) return i;
  throw std::runtime_error("no live node");
}

std::size_t redis_cluster::master_of(std::uint16_t slot) const {
  auto r = client(any_live_node()).command({"CLUSTER", "SLOTS"});
  for (std::size_t i = 0; i < r->elements; ++i) {
    const redisReply* e = r->element[i];
    if (e->element[0]->integer <= slot && slot <= e->element[1]->integer)
      return index_of_port(static_cast<std::uint16_t>(e->element[2]->element[1]->integer));
  }
  throw std::runtime_error("slot " + std::to_string(slot) + " has no master");
}

std::vector<std::size_t> redis_cluster::masters() const {
  auto r = client(any_live_node()).command({"CLUSTER", "SLOTS"});
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < r->elements; ++i) {
    const auto idx =
        index_of_port(static_cast<std::uint16_t>(r->element[i]->element[2]->element[1]->integer));
    if (std::find(out.begin(), out.end(), idx) == out.end()) out.push_back(idx);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::uint16_t redis_cluster::server_key_slot(const std::string& key) const {
  auto r = client(any_live_node()).command({"CLUSTER", "KEYSLOT", key});
  return static_cast<std::uint16_t>(r->integer);
}

std::size_t redis_cluster::kill_master_of(std::uint16_t slot) {
  const auto m = master_of(slot);
  nodes_[m]->kill();
  return m;
}

std::size_t redis_cluster::wait_for_failover(std::uint16_t slot, std::size_t old_master,
                                             std::chrono::milliseconds within) {
  const auto until = clock_type::now() + within;
  for (;;) {
    try {
      const auto m = master_of(slot);
      if (m != old_master && nodes_[m]->running()) {
        wait_until_consistent(std::chrono::duration_cast<std::chrono::milliseconds>(
            std::max(until - clock_type::now(), clock_type::duration{1ms})));
        return m;
      }
    } catch (const std::runtime_error&) {
      // A node busy failing over may not answer in time; ask again.
    }
    if (clock_type::now() > until)
      throw std::runtime_error("slot " + std::to_string(slot) + " was not failed over in time");
    std::this_thread::sleep_for(20ms);
  }
}

void redis_cluster::wait_until_consistent(std::chrono::milliseconds within) const {
  const auto until = clock_type::now() + within;
  std::string last;
  for (;;) {
    bool ok = true;
    std::string signature;
    for (std::size_t i = 0; i < nodes_.size() && ok; ++i) {
      if (!nodes_[i]->running()) continue;
      try {
        auto c = client(i);
        const auto info = text(*c.command({"CLUSTER", "INFO"}));
        if (info_field(info, "cluster_state") != "ok") {
          ok = false;
          last = "node " + std::to_string(i) + ": " + info_field(info, "cluster_state");
          break;
        }
        const auto sig = slots_signature(*c.command({"CLUSTER", "SLOTS"}));
        if (signature.empty()) signature = sig;
        if (sig != signature) {
          ok = false;
          last = "nodes disagree: " + signature + "vs " + sig;
        }
      } catch (const std::runtime_error& e) {
        ok = false;
        last = e.what();
      }
    }
    if (ok) return;
    if (clock_type::now() > until)
      throw std::runtime_error("the cluster did not become consistent: " + last);
    std::this_thread::sleep_for(20ms);
  }
}

void redis_cluster::begin_migration(std::uint16_t slot, std::size_t from, std::size_t to) {
  const std::string s = std::to_string(slot);
  // Importing first, then migrating: the order redis-cli uses, so that an ASK from the
  // source always finds a target that accepts ASKING.
  auto r1 = client(to).command({"CLUSTER", "SETSLOT", s, "IMPORTING", node_id(from)});
  if (redis::is_error(*r1)) throw std::runtime_error("SETSLOT IMPORTING: " + text(*r1));
  auto r2 = client(from).command({"CLUSTER", "SETSLOT", s, "MIGRATING", node_id(to)});
  if (redis::is_error(*r2)) throw std::runtime_error("SETSLOT MIGRATING: " + text(*r2));
}

std::size_t redis_cluster::migrate_keys(std::uint16_t slot, std::size_t from, std::size_t to,
                                        std::size_t batch, std::chrono::milliseconds pause) {
  auto src = client(from);
  std::size_t moved = 0;
  for (;;) {
    auto keys =
        src.command({"CLUSTER", "GETKEYSINSLOT", std::to_string(slot), std::to_string(batch)});
    if (keys->type != REDIS_REPLY_ARRAY) throw std::runtime_error("GETKEYSINSLOT failed");
    if (keys->elements == 0) return moved;
    std::vector<std::string> args{"MIGRATE", "127.0.0.1", std::to_string(port(to)), "", "0",
                                  "5000",    "KEYS"};
    for (std::size_t i = 0; i < keys->elements; ++i) args.push_back(text(*keys->element[i]));
    auto r = src.command(args);
    if (redis::is_error(*r)) throw std::runtime_error("MIGRATE: " + text(*r));
    moved += keys->elements;
    if (pause.count() > 0) std::this_thread::sleep_for(pause);
  }
}

void redis_cluster::finish_migration(std::uint16_t slot, std::size_t from, std::size_t to) {
  const std::string s = std::to_string(slot);
  // The target first (it bumps its epoch and owns the slot), then the source, then the
  // rest; gossip would spread it anyway, telling everyone makes the tests deterministic.
  std::vector<std::size_t> order{to, from};
  for (auto m : masters())
    if (m != to && m != from) order.push_back(m);
  for (auto i : order) {
    auto r = client(i).command({"CLUSTER", "SETSLOT", s, "NODE", node_id(to)});
    if (redis::is_error(*r)) throw std::runtime_error("SETSLOT NODE: " + text(*r));
  }
}

}  // namespace sluice::test
