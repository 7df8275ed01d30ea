#pragma once
#include <chrono>
#include <cstdint>
#include <system_error>

namespace sluice {

/// The answer to "may this caller spend `cost` tokens now?".
struct decision {
  bool allowed = false;
  std::uint64_t limit = 0;      ///< the policy's capacity
  std::uint64_t remaining = 0;  ///< whole tokens left after this decision
  /// 0 when allowed; otherwise the exact time until `cost` tokens exist (ms, rounded up).
  std::chrono::milliseconds retry_after{0};
  /// Time until the bucket is full again (ms, rounded up). A degraded decision of `open` or
  /// `closed` says it as if the bucket had been full or empty.
  std::chrono::milliseconds reset_after{0};
  /// True when the failure mode decided because the backend failed (see backend_error).
  bool degraded = false;
  std::error_code backend_error;  ///< why it is degraded; empty otherwise
};

}  // namespace sluice
