#include <sluice/error.hpp>
#include <sluice/policy.hpp>

#include <cmath>

namespace sluice {

std::error_code validate(const policy& p) noexcept {
  if (p.algorithm != algorithm::token_bucket) return errc::unsupported_algorithm;
  if (p.capacity < 1 || p.capacity > max_capacity) return errc::invalid_capacity;
  // The rate is kept as whole milli-tokens per second; below half of one it would round
  // to zero and never refill. `!(x >= y)` also catches NaN.
  if (!std::isfinite(p.refill_per_second) || !(p.refill_per_second >= min_refill_per_second) ||
      p.refill_per_second > max_refill_per_second) {
    return errc::invalid_refill_rate;
  }
  return {};
}

std::error_code validate(std::string_view key, const policy& p, std::uint64_t cost) noexcept {
  if (auto ec = validate(p)) return ec;
  if (key.empty()) return errc::empty_key;
  if (key.size() > max_key_size) return errc::key_too_long;
  if (cost < 1) return errc::invalid_cost;
  if (cost > p.capacity) return errc::cost_exceeds_capacity;
  return {};
}

std::string_view to_string(algorithm a) noexcept {
  switch (a) {
    case algorithm::token_bucket: return "token_bucket";
  }
  return "unknown";
}

std::string_view to_string(failure_mode m) noexcept {
  switch (m) {
    case failure_mode::open: return "open";
    case failure_mode::closed: return "closed";
    case failure_mode::local: return "local";
  }
  return "unknown";
}

std::optional<algorithm> parse_algorithm(std::string_view s) noexcept {
  if (s == "token_bucket") return algorithm::token_bucket;
  return std::nullopt;
}

std::optional<failure_mode> parse_failure_mode(std::string_view s) noexcept {
  if (s == "open") return failure_mode::open;
  if (s == "closed") return failure_mode::closed;
  if (s == "local") return failure_mode::local;
  return std::nullopt;
}

}  // namespace sluice
