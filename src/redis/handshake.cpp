#include "redis/handshake.hpp"

#include <string>

#include "redis/resp.hpp"
#include "redis/scripts.hpp"

namespace sluice::redis {

handshake make_handshake(const handshake_options& o) {
  handshake h;
  auto add = [&h](std::initializer_list<std::string_view> args) {
    append_command(h.commands, args);
    ++h.replies;
  };
  if (!o.password.empty()) {
    if (o.user.empty()) {
      add({"AUTH", o.password});
    } else {
      add({"AUTH", o.user, o.password});
    }
  }
  if (o.role == handshake_role::sentinel) return h;
  if (o.db != 0) add({"SELECT", std::to_string(o.db)});
  for (const auto* script : detail::lua_scripts) add({"SCRIPT", "LOAD", script->source});
  return h;
}

}  // namespace sluice::redis
