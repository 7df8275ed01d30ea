#pragma once
/// What a limit is: the algorithm and its parameters, and what to do when the backend fails.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <system_error>

namespace sluice {

enum class algorithm {
  /// Holds up to `capacity` tokens and refills `refill_per_second`; a request spends `cost`.
  token_bucket,
};

/// What a check decides when its backend (Redis) fails or does not answer in time.
enum class failure_mode {
  open,    ///< allow; the decision is marked degraded
  closed,  ///< deny; the decision is marked degraded
  local,   ///< decide with this process's memory backend; marked degraded
};

/// Bounds checked by validate(); a request outside them never reaches a backend.
inline constexpr std::size_t max_key_size = 1024;  ///< bytes, before the backend's prefix
inline constexpr std::uint64_t max_capacity = 1'000'000'000;
/// Refill rates are kept as whole milli-tokens per second, so the math stays integer and
/// exact; a rate is rounded to the nearest 0.001 and must be at least that.
inline constexpr double min_refill_per_second = 0.001;
inline constexpr double max_refill_per_second = 1e9;

struct policy {
  sluice::algorithm algorithm = sluice::algorithm::token_bucket;
  std::uint64_t capacity = 0;      ///< burst size, in tokens: 1..max_capacity
  double refill_per_second = 0.0;  ///< tokens added per second: min..max_refill_per_second
  failure_mode on_failure = failure_mode::open;
  /// Remember the backend's denials in-process and deny the same key again locally until
  /// its retry time, without a round trip. Never admits anything locally, so decisions
  /// stay exact; it only saves Redis work while clients keep knocking.
  bool cache_denials = false;
};

/// An empty error_code when `p` is usable, else the errc that says which field is wrong.
std::error_code validate(const policy& p) noexcept;
/// validate(p), then the key (non-empty, at most max_key_size) and the cost (1..capacity).
std::error_code validate(std::string_view key, const policy& p, std::uint64_t cost) noexcept;

std::string_view to_string(algorithm a) noexcept;
std::string_view to_string(failure_mode m) noexcept;
std::optional<algorithm> parse_algorithm(std::string_view s) noexcept;
std::optional<failure_mode> parse_failure_mode(std::string_view s) noexcept;

}  // namespace sluice
