#pragma once
#include <chrono>
#include <cstdint>
#include <system_error>

namespace sluice {

/// The answer to "may this caller spend `cost` now?", the same for every algorithm.
struct decision {
  bool allowed = false;
  std::uint64_t limit = 0;      ///< limit_of(policy): a bucket's capacity, a window's limit
  std::uint64_t remaining = 0;  ///< whole units (tokens, requests) left after this decision
  /// 0 when allowed; otherwise the exact time until a request of the same `cost` would be
  /// allowed (ms, rounded up).
  std::chrono::milliseconds retry_after{0};
  /// Time until nothing admitted counts any more: a bucket is full again, a window empty
  /// (ms, rounded up). A degraded decision of `open` or `closed` says it as if the key had
  /// been new or used up.
  std::chrono::milliseconds reset_after{0};
  /// True when the failure mode decided because the backend failed (see backend_error).
  bool degraded = false;
  std::error_code backend_error;  ///< why it is degraded; empty otherwise
};

}  // namespace sluice
