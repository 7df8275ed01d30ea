#include "redis/slot_command.hpp"

#include <sluice/error.hpp>
#include <sluice/policy.hpp>

#include "redis/reply_action.hpp"

namespace sluice::redis {
namespace {

// A whole call's error reply: NOSCRIPT (exec_script re-sends it as EVAL) or the script's.
std::error_code call_error(const redisReply& reply) noexcept {
  return to_error(classify_reply(reply).what == reply_action::kind::resend_as_eval
                      ? script_reply::noscript
                      : script_reply::failed);
}

// The step at e[0..3]: four bounded integers, or (its key is no sorted set) an error and
// three zeros, which fails that step as a failed script would.
std::error_code to_step(const redisReply* const* e, slot_reply& out) noexcept {
  if (e[0] && e[0]->type == REDIS_REPLY_ERROR) return to_error(script_reply::failed);
  for (std::size_t i = 0; i < 4; ++i) {
    if (!e[i] || e[i]->type != REDIS_REPLY_INTEGER || e[i]->integer < 0)
      return make_error_code(errc::backend_protocol_error);
  }
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

}  // namespace

script_request slot_script(std::string full_key, const slot_request& request) {
  script_request r;
  r.script = &detail::lua_slots;
  r.keys.push_back(std::move(full_key));
  r.args = {std::to_string(static_cast<int>(request.op)), std::string(request.id),
            std::to_string(request.limit), std::to_string(request.lease_ttl.count())};
  return r;
}

void append_slot_command(std::string& out, script_call how, std::span<const slot_step_args> steps) {
  // The numbers' text lives here while the argument views point at it.
  std::vector<std::string> numbers;
  numbers.reserve(1 + 3 * steps.size());
  numbers.push_back(std::to_string(steps.size()));
  std::vector<std::string_view> argv;
  argv.reserve(3 + 5 * steps.size());
  argv.push_back(how == script_call::evalsha ? "EVALSHA" : "EVAL");
  argv.push_back(how == script_call::evalsha ? detail::lua_slots.sha1 : detail::lua_slots.source);
  argv.push_back(numbers.back());
  for (const auto& s : steps) argv.push_back(s.full_key);
  for (const auto& s : steps) {
    numbers.push_back(std::to_string(static_cast<int>(s.op)));
    argv.push_back(numbers.back());
    argv.push_back(s.id);
    numbers.push_back(std::to_string(s.limit));
    argv.push_back(numbers.back());
    numbers.push_back(std::to_string(s.lease_ttl.count()));
    argv.push_back(numbers.back());
  }
  append_command(out, argv.data(), argv.size());
}

std::error_code to_slot_reply(const redisReply& reply, slot_reply& out) noexcept {
  if (reply.type == REDIS_REPLY_ERROR) return call_error(reply);
  if (reply.type != REDIS_REPLY_ARRAY || reply.elements != 4)
    return make_error_code(errc::backend_protocol_error);
  return to_step(reply.element, out);
}

std::error_code to_slot_replies(const redisReply& reply, std::size_t n,
                                std::vector<slot_result>& out) {
  out.assign(n, {});
  if (reply.type == REDIS_REPLY_ERROR) return call_error(reply);
  if (reply.type != REDIS_REPLY_ARRAY || reply.elements != 4 * n)
    return make_error_code(errc::backend_protocol_error);
  for (std::size_t i = 0; i < n; ++i) out[i].ec = to_step(reply.element + 4 * i, out[i].reply);
  return {};
}

}  // namespace sluice::redis
