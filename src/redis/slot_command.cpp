#include "redis/slot_command.hpp"

#include <sluice/error.hpp>
#include <sluice/policy.hpp>

#include "redis/decide_command.hpp"
#include "redis/reply_action.hpp"

namespace sluice::redis {

script_request slot_script(std::string full_key, const slot_request& request) {
  script_request r;
  r.script = &detail::lua_slots;
  r.keys.push_back(std::move(full_key));
  r.args = {std::to_string(static_cast<int>(request.op)), std::string(request.id),
            std::to_string(request.limit), std::to_string(request.lease_ttl.count())};
  return r;
}

std::error_code to_slot_reply(const redisReply& reply, slot_reply& out) noexcept {
  if (reply.type == REDIS_REPLY_ERROR) {
    return to_error(classify_reply(reply).what == reply_action::kind::resend_as_eval
                        ? script_reply::noscript
                        : script_reply::failed);
  }
  if (reply.type != REDIS_REPLY_ARRAY || reply.elements != 4)
    return make_error_code(errc::backend_protocol_error);
  for (std::size_t i = 0; i < 4; ++i) {
    const auto* e = reply.element[i];
    if (!e || e->type != REDIS_REPLY_INTEGER || e->integer < 0)
      return make_error_code(errc::backend_protocol_error);
  }
  const auto* const* e = reply.element;
  if (e[0]->integer > 1 || e[1]->integer > static_cast<long long>(max_capacity) ||
      e[2]->integer > max_lease_ttl.count() || e[3]->integer > max_lease_ttl.count())
    return make_error_code(errc::backend_protocol_error);
  out = {};
  out.held = e[0]->integer == 1;
  out.in_flight = static_cast<std::uint64_t>(e[1]->integer);
  out.retry_after = std::chrono::milliseconds{e[2]->integer};
  out.expires_in = std::chrono::milliseconds{e[3]->integer};
  return {};
}

}  // namespace sluice::redis
