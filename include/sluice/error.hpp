#pragma once
/// Error codes of Sluice. Over the limit is not an error (`decision::allowed == false`);
/// errors are invalid input, rejected before anything reaches a backend, and backend
/// trouble, which the limiter turns into the policy's failure mode.
#include <system_error>

namespace sluice {

enum class errc {
  // Invalid input (is_invalid_input() is true).
  empty_key = 1,
  key_too_long,
  invalid_cost,
  cost_exceeds_capacity,
  invalid_capacity,
  invalid_refill_rate,
  unsupported_algorithm,
  invalid_limit,
  invalid_window,
  mismatched_parameters,
  invalid_gcra_rate,
  unsupported_operation,
  invalid_duration,
  invalid_lease_ttl,  ///< policy::lease_ttl (or a slot's) outside 0..max_lease_ttl
  invalid_slot_id,    ///< a slot id that is not 32 hex digits
  // Backend trouble (is_backend_error() is true).
  backend_timeout = 100,
  backend_unavailable,
  backend_protocol_error,
  backend_script_error,
  backend_overloaded,
  backend_shutting_down,
};

/// The category of sluice::errc; its name is "sluice".
const std::error_category& error_category() noexcept;

inline std::error_code make_error_code(errc e) noexcept {
  return {static_cast<int>(e), error_category()};
}

/// True for errors the caller caused (a 4xx in HTTP terms).
bool is_invalid_input(std::error_code ec) noexcept;
/// True for errors of the backend (Redis down, slow, or answering nonsense).
bool is_backend_error(std::error_code ec) noexcept;

}  // namespace sluice

template <>
struct std::is_error_code_enum<sluice::errc> : std::true_type {};
