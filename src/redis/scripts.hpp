#pragma once
// Lua scripts compiled into the library from lua/*.lua (see cmake/embed_lua.cmake).
#include <array>
#include <string_view>

namespace sluice::detail {

struct lua_script {
  std::string_view source;
  std::string_view sha1;  ///< hex SHA1 of source, computed at build time, for EVALSHA
};

extern const lua_script lua_decide;
/// All-or-nothing over several keys (one slot, on a cluster); see its opening comment.
extern const lua_script lua_decide_multi;
/// Independent decisions on several keys in one call (the decision batcher's).
extern const lua_script lua_decide_batch;
/// Gives back tokens spent by an earlier slot group of a cross-slot multi-key decision.
extern const lua_script lua_refund;
/// Quota leases: a lease of up to N units, or the return of units not spent.
extern const lua_script lua_lease;
/// Concurrency limits: acquire, release or renew a slot.
extern const lua_script lua_slots;

/// Every script above, in one list: what a connection's handshake loads (handshake.hpp).
inline constexpr std::array<const lua_script*, 6> lua_scripts{
    &lua_decide, &lua_decide_multi, &lua_decide_batch, &lua_refund, &lua_lease, &lua_slots};

}  // namespace sluice::detail
