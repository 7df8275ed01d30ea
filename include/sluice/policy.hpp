#pragma once
/// What a limit is: the algorithm and its parameters, and what to do when the backend fails.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <system_error>

namespace sluice {

/// How a limit counts. Buckets take `capacity` and `refill_per_second`; windows take `limit`
/// and `window`. docs/ALGORITHMS.md compares them.
enum class algorithm {
  /// Holds up to `capacity` tokens and refills `refill_per_second`; a request spends `cost`.
  token_bucket,
  /// The generic cell rate algorithm: a token bucket kept as one timestamp (the theoretical
  /// arrival time, in microseconds). Same parameters and nearly the same decisions as
  /// token_bucket (time per token is rounded to a whole microsecond), smaller state.
  gcra,
  /// At most `limit` in any `window`, exactly: a log of the admitted requests' times (one
  /// entry per distinct millisecond), so its memory grows with the limit
  /// (max_sliding_window_limit).
  sliding_window,
  /// Cloudflare's approximation of a sliding window: the previous aligned window's count,
  /// weighted by how much of it still overlaps, plus the current one's. Constant state;
  /// never more than `limit` in an aligned window, fewer than 2 x `limit` in any window.
  sliding_window_counter,
  /// At most `limit` per window aligned to the Unix epoch (a quota): constant state.
  fixed_window,
};

/// True for the algorithms that take `limit` and `window` instead of a bucket's parameters.
constexpr bool is_window(algorithm a) noexcept {
  return a == algorithm::sliding_window || a == algorithm::sliding_window_counter ||
         a == algorithm::fixed_window;
}

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
/// gcra keeps time in whole microseconds: at most a million per second, and a full burst
/// (capacity / rate) must fit in 10^15 us (about 31 years).
inline constexpr double max_gcra_refill_per_second = 1e6;
/// Windows: from 1 ms to 366 days.
inline constexpr std::chrono::milliseconds max_window{366LL * 24 * 3600 * 1000};
/// sliding_window stores one entry per distinct millisecond with admitted requests, up to
/// `limit` entries per key (16 bytes each in memory, about 20 on Redis).
inline constexpr std::uint64_t max_sliding_window_limit = 10'000;
/// The longest quota lease (policy::lease_ttl).
inline constexpr std::chrono::milliseconds max_lease_ttl{3'600'000};  // one hour
struct policy {
  sluice::algorithm algorithm = sluice::algorithm::token_bucket;
  // Buckets (token_bucket, gcra); 0 for windows.
  std::uint64_t capacity = 0;      ///< burst size, in tokens: 1..max_capacity
  double refill_per_second = 0.0;  ///< tokens added per second: min..max_refill_per_second
  // Windows (sliding_window, sliding_window_counter, fixed_window); 0 for buckets.
  std::uint64_t limit = 0;              ///< requests (in cost units) per window: 1..max_capacity
  std::chrono::milliseconds window{0};  ///< 1 ms..max_window
  failure_mode on_failure = failure_mode::open;
  /// Remember the backend's denials in-process and deny the same key again locally until
  /// its retry time, without a round trip. Never admits anything locally, so decisions
  /// stay exact; it only saves Redis work while clients keep knocking.
  bool cache_denials = false;
  /// Quota leases (docs/LEASES.md): 0, the default, decides every check on the backend.
  /// Above 0 (at most max_lease_ttl), the limiter takes units of the key's limit from the
  /// backend ahead of demand, each lease valid this long, and decides from them in-process:
  /// a hot key at memory speed, at the price of a stated bound. Admitted in any window is
  /// at most what the algorithm allows plus rate x lease_ttl (token bucket, GCRA, sliding
  /// window); fixed and sliding-counter windows stay exact. Backends without leases (the
  /// memory backend) decide every check as without.
  std::chrono::milliseconds lease_ttl{0};
};

/// The most a request may cost: `capacity` for buckets, `limit` for windows. Decisions
/// report it as their `limit`.
constexpr std::uint64_t limit_of(const policy& p) noexcept {
  return is_window(p.algorithm) ? p.limit : p.capacity;
}

/// An empty error_code when `p` is usable, else the errc that says which field is wrong
/// (a bucket's parameters on a window, or the reverse, is errc::mismatched_parameters).
std::error_code validate(const policy& p) noexcept;
/// validate(p), then the key (non-empty, at most max_key_size) and the cost (1..limit_of(p)).
std::error_code validate(std::string_view key, const policy& p, std::uint64_t cost) noexcept;

/// A policy validated once, when it was made, and immutable since: what a loaded
/// configuration hands the hot path. The limiter's overloads that take one check only the
/// per-call input (the key and the cost), where a plain `policy`, which its owner may change
/// between calls, is validated on every call. Cheap to copy (a policy is a few words).
class valid_policy {
 public:
  /// Validates `p`; throws std::system_error with validate(p)'s code when it is not usable.
  explicit valid_policy(const policy& p);
  /// The valid_policy of `p`, or std::nullopt with `ec` set to validate(p)'s code.
  static std::optional<valid_policy> make(const policy& p, std::error_code& ec) noexcept;

  const policy& get() const noexcept { return p_; }
  operator const policy&() const noexcept { return p_; }  // NOLINT: a policy, read-only

 private:
  struct trusted {};
  valid_policy(trusted, const policy& p) noexcept : p_(p) {}
  policy p_;
};

/// The per-call input of a check against a valid_policy: the key (non-empty, at most
/// max_key_size) and the cost (1..limit_of(p)); the policy itself was validated when made.
std::error_code validate(std::string_view key, const valid_policy& p, std::uint64_t cost) noexcept;

std::string_view to_string(algorithm a) noexcept;
std::string_view to_string(failure_mode m) noexcept;
std::optional<algorithm> parse_algorithm(std::string_view s) noexcept;
std::optional<failure_mode> parse_failure_mode(std::string_view s) noexcept;

}  // namespace sluice
