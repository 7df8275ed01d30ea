#pragma once
// The library's side of include/sluice/log.hpp: check the level (one relaxed atomic load),
// then build and hand over the message:
//   detail::logf(log_level::info, "{}: connected to {}:{}", name, host, port);
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include <sluice/log.hpp>

namespace sluice::detail {

bool log_enabled(log_level level) noexcept;
/// Hands `message` to the sink when `level` is enabled. Never throws (a sink that throws
/// loses its message).
void log(log_level level, std::string_view message) noexcept;

/// log() with a message formatted by {fmt}, built only when `level` is enabled.
template <class... Args>
void logf(log_level level, fmt::format_string<Args...> format, Args&&... args) noexcept {
  if (!log_enabled(level)) return;
  try {
    log(level, fmt::format(format, std::forward<Args>(args)...));
  } catch (...) {
  }
}

}  // namespace sluice::detail
