// Built by tests/cmake/core_only: a memory-only program, linked against sluice::core alone.
#include <cstdio>

#include <sluice/limiter.hpp>
#include <sluice/log.hpp>
#include <sluice/memory_backend.hpp>

int main() {
  sluice::set_log_level(sluice::log_level::off);
  sluice::limiter limiter = sluice::limiter::in_memory();
  sluice::policy policy;
  policy.capacity = 2;
  policy.refill_per_second = 0.001;
  const bool a = limiter.check("k", policy).allowed;
  const bool b = limiter.check("k", policy).allowed;
  const bool c = limiter.check("k", policy).allowed;
  if (!a || !b || c) {
    std::printf("FAIL: %d %d %d\n", a, b, c);
    return 1;
  }
  std::printf("burst admitted, then limited\n");
  return 0;
}
