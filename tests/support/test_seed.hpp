#pragma once
// The seed of a randomized test: fixed, so that the same commit gets the same verdict on
// every machine, and named in the failure so that a failing history can be replayed. Set
// SLUICE_TEST_SEED to explore other histories by hand (`SLUICE_TEST_SEED=$RANDOM ctest ...`).
#include <cstdint>
#include <cstdlib>
#include <string>

namespace sluice::test {

/// `fixed` unless SLUICE_TEST_SEED holds a number; wrap the test's body in
/// SCOPED_TRACE(seed_trace(seed)) so that every failure prints it.
inline std::uint64_t test_seed(std::uint64_t fixed) {
  if (const char* s = std::getenv("SLUICE_TEST_SEED"); s && *s) {
    char* end = nullptr;
    const auto v = std::strtoull(s, &end, 10);
    if (end && *end == '\0') return v;
  }
  return fixed;
}

inline std::string seed_trace(std::uint64_t seed) {
  return "seed " + std::to_string(seed) + " (replay: SLUICE_TEST_SEED=" + std::to_string(seed) +
         ")";
}

}  // namespace sluice::test
