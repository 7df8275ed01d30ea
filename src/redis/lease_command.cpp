#include "redis/lease_command.hpp"

#include <sluice/error.hpp>

#include <array>
#include <mutex>

#include "algorithm/limit.hpp"
#include "redis/cluster/key_slot.hpp"
#include "redis/decide_command.hpp"

namespace sluice::redis {
namespace {

// For each of the 16384 slots, the shortest decimal number whose CRC16 falls on it: as a
// hash tag, it puts any key on that slot. Found once by counting up (about 150k CRCs).
const std::array<std::uint32_t, cluster::slot_count>& tag_for_slot() {
  static const auto table = [] {
    std::array<std::uint32_t, cluster::slot_count> t{};
    std::array<bool, cluster::slot_count> seen{};
    std::size_t left = cluster::slot_count;
    for (std::uint32_t n = 0; left > 0; ++n) {
      const auto slot = cluster::crc16(std::to_string(n)) % cluster::slot_count;
      if (seen[slot]) continue;
      seen[slot] = true;
      t[slot] = n;
      --left;
    }
    return t;
  }();
  return table;
}

constexpr std::int64_t lease_step = 6;
constexpr std::int64_t return_step = 7;

script_request lease_call(std::string full_key, const policy& p, std::int64_t step,
                          std::int64_t cost) {
  const auto params = detail::to_limit_params(p, static_cast<std::uint64_t>(cost));
  script_request r;
  r.script = &detail::lua_lease;
  r.keys.push_back(askers_key(full_key));
  r.keys.insert(r.keys.begin(), std::move(full_key));
  r.args = {std::to_string(static_cast<std::int64_t>(params.algo) + 8 * step),
            std::to_string(params.a), std::to_string(params.b), std::to_string(params.cost)};
  return r;
}

}  // namespace

std::string askers_key(std::string_view full_key) {
  const auto slot = cluster::key_slot(full_key);
  std::string k = "sluice:askers:{" + std::to_string(tag_for_slot()[slot]) + "}:";
  k.append(full_key);
  return k;
}

script_request lease_script(std::string full_key, const policy& p, const lease_request& request) {
  auto r = lease_call(std::move(full_key), p, lease_step, static_cast<std::int64_t>(request.cost));
  r.args.push_back(std::to_string(request.want));
  r.args.push_back(std::to_string(p.lease_ttl.count()));
  r.args.emplace_back(request.instance);
  return r;
}

script_request lease_return_script(std::string full_key, const policy& p, std::uint64_t units,
                                   std::int64_t granted_at_ms) {
  auto r = lease_call(std::move(full_key), p, return_step, 1);
  r.args.push_back(std::to_string(units));
  r.args.push_back(std::to_string(granted_at_ms));
  r.args.emplace_back("0");
  return r;
}

std::error_code to_lease_grant(const redisReply& reply, const policy& p,
                               lease_grant& out) noexcept {
  detail::limit_outcome o;
  if (auto ec = to_error(parse_outcome_reply(reply, 7, o))) return ec;
  const auto* e = reply.element;
  for (std::size_t i = 4; i < 7; ++i) {
    if (e[i]->type != REDIS_REPLY_INTEGER || e[i]->integer < 0)
      return make_error_code(errc::backend_protocol_error);
  }
  const auto granted = e[4]->integer;
  // Granted units come with an allowed check, and never more than the limit holds.
  if ((granted > 0) != o.allowed || granted > static_cast<long long>(limit_of(p)) ||
      e[5]->integer > max_lease_ttl.count())
    return make_error_code(errc::backend_protocol_error);
  out = {};
  out.d = detail::to_decision(o, limit_of(p));
  out.granted = static_cast<std::uint64_t>(granted);
  out.valid = std::chrono::milliseconds{e[5]->integer};
  out.granted_at_ms = e[6]->integer;
  return {};
}

std::error_code to_return_decision(const redisReply& reply, const policy& p,
                                   decision& out) noexcept {
  detail::limit_outcome o;
  if (auto ec = to_error(parse_outcome_reply(reply, 7, o))) return ec;
  out = detail::to_decision(o, limit_of(p));
  return {};
}

}  // namespace sluice::redis
