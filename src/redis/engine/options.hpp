#pragma once
// The checks of redis_options, once for every topology: each backend's factory calls this
// before it builds anything, so a bad option is a start-up error with the same text
// whichever URL scheme was given (and a Sentinel's masters, built later, are built from
// options already checked).
#include <sluice/redis_backend.hpp>

#include <cstdint>

namespace sluice::redis {

enum class topology : std::uint8_t { standalone, sentinel, cluster };

/// Throws std::invalid_argument naming the first option out of range for `t`.
void validate_options(const redis_options& o, topology t);

}  // namespace sluice::redis
