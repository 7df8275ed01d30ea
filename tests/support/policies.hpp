#pragma once
// Policies as tests write them: a bucket (token_bucket, gcra) or a window.
#include <sluice/policy.hpp>

#include <chrono>
#include <cstdint>

namespace sluice::test {

inline policy bucket(algorithm a, std::uint64_t capacity, double refill_per_second) {
  policy p;
  p.algorithm = a;
  p.capacity = capacity;
  p.refill_per_second = refill_per_second;
  return p;
}

inline policy window(algorithm a, std::uint64_t limit, std::chrono::milliseconds length) {
  policy p;
  p.algorithm = a;
  p.limit = limit;
  p.window = length;
  return p;
}

inline policy window(algorithm a, std::uint64_t limit, std::int64_t length_ms) {
  return window(a, limit, std::chrono::milliseconds{length_ms});
}

}  // namespace sluice::test
