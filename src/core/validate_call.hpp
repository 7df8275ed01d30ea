#pragma once
// The per-call half of validate(key, policy, cost) (private): the key and the cost against
// a policy already known valid. validate(key, policy, cost) is validate(policy) then this;
// the limiter runs this alone for a valid_policy's policy.
#include <sluice/policy.hpp>

#include <cstdint>
#include <string_view>
#include <system_error>

namespace sluice::detail {

std::error_code validate_call(std::string_view key, const policy& p, std::uint64_t cost) noexcept;

}  // namespace sluice::detail
