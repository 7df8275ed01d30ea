#pragma once
// `sluice simulate --traffic`: request times from steady:RATE, burst:N@PERIOD, poisson:RATE
// or file:PATH, in microseconds from 0.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::cli {

// The most requests one simulation decides (10^7: a few seconds).
inline constexpr std::uint64_t max_simulated_requests = 10'000'000;
// The most requests a second steady: and poisson: take: one a microsecond.
inline constexpr double max_traffic_rate = 1e6;

struct traffic_spec {
  enum class shape { steady, burst, poisson, file };
  shape kind = shape::steady;
  double rate = 0;             // steady, poisson: requests per second
  std::uint64_t burst = 0;     // burst: N
  std::int64_t period_us = 0;  // burst: PERIOD
  std::string path;            // file: PATH
  std::string text;            // as given
};

// The spec, or std::nullopt with a one-line reason naming --traffic in `why`.
std::optional<traffic_spec> parse_traffic(std::string_view text, std::string& why);

// The request times of `spec` within [0, duration_us), in order. Reads a file: traffic's
// file when made; the times of the others are computed as they are taken.
class traffic_source {
 public:
  // std::nullopt with a reason in `why` (a file that cannot be read, a bad line, a time
  // past the duration, more than max_simulated_requests foreseen). `duration_text` is
  // --duration as given, for messages.
  static std::optional<traffic_source> make(const traffic_spec& spec, std::int64_t duration_us,
                                            std::string_view duration_text, std::uint64_t seed,
                                            std::string& why);

  // The next request's time; false when there are no more.
  bool next(std::int64_t& t_us);

 private:
  traffic_source(const traffic_spec& spec, std::int64_t duration_us, std::uint64_t seed)
      : spec_(spec), duration_us_(duration_us), rng_(seed) {}

  traffic_spec spec_;
  std::int64_t duration_us_ = 0;
  std::uint64_t index_ = 0;       // steady: requests so far; burst: within the burst; file
  std::int64_t burst_at_us_ = 0;  // burst: the current burst's time
  double poisson_at_us_ = 0;      // poisson: the last arrival, unrounded
  std::mt19937_64 rng_;
  std::vector<std::int64_t> times_;  // file: sorted
};

}  // namespace sluice::cli
