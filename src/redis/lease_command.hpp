#pragma once
// Quota leases on the wire (lua/lease.lua), without I/O: the script_request of a lease and
// of a return, and their replies as lease_grant and decision.
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>

#include <sluice/backend.hpp>
#include <sluice/decision.hpp>
#include <sluice/policy.hpp>

#include "redis/resp.hpp"
#include "redis/script_request.hpp"

namespace sluice::redis {

/// The key of the instances that asked for `full_key` lately (lua/lease.lua's KEYS[2]): on
/// the same Cluster slot as `full_key` whatever it holds, through a hash tag chosen for that
/// slot, and named after it so that two limits never share one.
std::string askers_key(std::string_view full_key);

/// lua/lease.lua's lease step for `request` on `full_key` under validated `p` (lease_ttl > 0).
script_request lease_script(std::string full_key, const policy& p, const lease_request& request);
/// lua/lease.lua's return step: `units` of the lease granted at `granted_at_ms`.
script_request lease_return_script(std::string full_key, const policy& p, std::uint64_t units,
                                   std::int64_t granted_at_ms);

/// The lease step's reply (7 integers) as a grant; an error code when it is not one.
std::error_code to_lease_grant(const redisReply& reply, const policy& p, lease_grant& out) noexcept;
/// The return step's reply as what a check of one unit sees after it.
std::error_code to_return_decision(const redisReply& reply, const policy& p,
                                   decision& out) noexcept;

}  // namespace sluice::redis
