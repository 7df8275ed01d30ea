#pragma once
// The connection handshake, defined once for every connection of every topology: what a
// connection sends before it serves (connection_config::handshake), and how many replies
// that is. Standalone, Cluster nodes and a Sentinel's master are data nodes: AUTH when there
// is a password, SELECT when the database is not 0 (standalone only: a cluster has none),
// and SCRIPT LOAD of every script the library embeds (scripts.hpp: lua_scripts), so EVALSHA
// works at once on a new, restarted or promoted server; NOSCRIPT (after SCRIPT FLUSH) is
// still handled per call (script_exec.hpp). A Sentinel is asked questions only: AUTH and
// nothing else. The connection always adds a PING, which makes the handshake a health check.
//
// HELLO is not sent: hiredis 0.14 (Debian's) reads RESP2 only, and AUTH works on every Redis.
#include <cstddef>
#include <string>
#include <string_view>

namespace sluice::redis {

/// Formatted commands and the number of replies they get.
struct handshake {
  std::string commands;
  std::size_t replies = 0;
};

/// Which server a handshake is for.
enum class handshake_role : unsigned char {
  data_node,  ///< serves script calls: AUTH, SELECT, SCRIPT LOAD of every script
  sentinel,   ///< answers SENTINEL queries: AUTH only
};

struct handshake_options {
  handshake_role role = handshake_role::data_node;
  std::string_view user;      ///< ACL user; empty: the default user
  std::string_view password;  ///< empty: no AUTH
  int db = 0;                 ///< SELECT when not 0 (data nodes only)
};

handshake make_handshake(const handshake_options& o);

}  // namespace sluice::redis
