#include <sluice/error.hpp>
#include <sluice/policy.hpp>

#include <cmath>
#include <system_error>

#include "algorithm/limit.hpp"
#include "core/validate_call.hpp"

namespace sluice {
namespace {

// A full gcra burst (capacity x T, in us) stays within 1e15 so that TAT plus it stays below
// 2^53 for Lua's doubles.
constexpr std::int64_t max_gcra_burst_us = 1'000'000'000'000'000;
// sliding_window_counter's weighted sum is below 2 x limit x window_ms: under 2^53.
constexpr double max_counter_limit_window = 4e15;

std::error_code validate_bucket(const policy& p) noexcept {
  if (p.limit != 0 || p.window.count() != 0) return errc::mismatched_parameters;
  if (p.capacity < 1 || p.capacity > max_capacity) return errc::invalid_capacity;
  // The rate is kept as whole milli-tokens per second; below half of one it would round
  // to zero and never refill. `!(x >= y)` also catches NaN.
  if (!std::isfinite(p.refill_per_second) || !(p.refill_per_second >= min_refill_per_second) ||
      p.refill_per_second > max_refill_per_second) {
    return errc::invalid_refill_rate;
  }
  if (p.algorithm == algorithm::gcra) {
    if (p.refill_per_second > max_gcra_refill_per_second) return errc::invalid_gcra_rate;
    const std::int64_t t = detail::gcra_time_per_token_us(p.refill_per_second);
    if (t < 1 || static_cast<std::int64_t>(p.capacity) > max_gcra_burst_us / t)
      return errc::invalid_gcra_rate;
  }
  return {};
}

std::error_code validate_window(const policy& p) noexcept {
  if (p.capacity != 0 || p.refill_per_second != 0.0) return errc::mismatched_parameters;
  if (p.limit < 1 || p.limit > max_capacity) return errc::invalid_limit;
  if (p.window.count() < 1 || p.window > max_window) return errc::invalid_window;
  if (p.algorithm == algorithm::sliding_window && p.limit > max_sliding_window_limit)
    return errc::invalid_limit;
  if (p.algorithm == algorithm::sliding_window_counter &&
      static_cast<double>(p.limit) * static_cast<double>(p.window.count()) >
          max_counter_limit_window)
    return errc::invalid_limit;
  return {};
}

}  // namespace

std::error_code validate(const policy& p) noexcept {
  if (p.lease_ttl.count() < 0 || p.lease_ttl > max_lease_ttl) return errc::invalid_lease_ttl;
  switch (p.algorithm) {
    case algorithm::token_bucket:
    case algorithm::gcra:
      return validate_bucket(p);
    case algorithm::sliding_window:
    case algorithm::sliding_window_counter:
    case algorithm::fixed_window:
      return validate_window(p);
  }
  return errc::unsupported_algorithm;
}

namespace detail {

std::error_code validate_call(std::string_view key, const policy& p, std::uint64_t cost) noexcept {
  if (key.empty()) return errc::empty_key;
  if (key.size() > max_key_size) return errc::key_too_long;
  if (cost < 1) return errc::invalid_cost;
  if (cost > limit_of(p)) return errc::cost_exceeds_capacity;
  return {};
}

}  // namespace detail

std::error_code validate(std::string_view key, const policy& p, std::uint64_t cost) noexcept {
  if (auto ec = validate(p)) return ec;
  return detail::validate_call(key, p, cost);
}

std::error_code validate(std::string_view key, const valid_policy& p, std::uint64_t cost) noexcept {
  return detail::validate_call(key, p.get(), cost);
}

valid_policy::valid_policy(const policy& p) : p_(p) {
  if (auto ec = validate(p_)) throw std::system_error(ec, "invalid policy");
}

std::optional<valid_policy> valid_policy::make(const policy& p, std::error_code& ec) noexcept {
  ec = validate(p);
  if (ec) return std::nullopt;
  return valid_policy(trusted{}, p);
}

std::string_view to_string(algorithm a) noexcept {
  switch (a) {
    case algorithm::token_bucket:
      return "token_bucket";
    case algorithm::gcra:
      return "gcra";
    case algorithm::sliding_window:
      return "sliding_window";
    case algorithm::sliding_window_counter:
      return "sliding_window_counter";
    case algorithm::fixed_window:
      return "fixed_window";
  }
  return "unknown";
}

std::string_view to_string(failure_mode m) noexcept {
  switch (m) {
    case failure_mode::open:
      return "open";
    case failure_mode::closed:
      return "closed";
    case failure_mode::local:
      return "local";
  }
  return "unknown";
}

std::optional<algorithm> parse_algorithm(std::string_view s) noexcept {
  for (const auto a : {algorithm::token_bucket, algorithm::gcra, algorithm::sliding_window,
                       algorithm::sliding_window_counter, algorithm::fixed_window}) {
    if (s == to_string(a)) return a;
  }
  return std::nullopt;
}

std::optional<failure_mode> parse_failure_mode(std::string_view s) noexcept {
  if (s == "open") return failure_mode::open;
  if (s == "closed") return failure_mode::closed;
  if (s == "local") return failure_mode::local;
  return std::nullopt;
}

}  // namespace sluice
