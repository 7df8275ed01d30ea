// Limits one client with an in-memory token bucket: a burst of `capacity` checks is
// admitted at once, the next is denied with the exact time until a token exists again.
// Exits 0 only when that is what happened, so it doubles as a test of the installed package.
#include <cstdio>
#include <string_view>

#include <sluice/sluice.hpp>

int main() {
  // The in-memory backend lives in this process; sluice::limiter_from_url("redis://...")
  // shares the same limit between every process that talks to that Redis.
  sluice::limiter limiter = sluice::limiter::in_memory();

  sluice::policy policy;
  policy.capacity = 3;             // a burst of three
  policy.refill_per_second = 0.5;  // then one request every two seconds

  std::printf("sluice %s: capacity %llu, refill %.1f/s\n", sluice::version,
              static_cast<unsigned long long>(policy.capacity), policy.refill_per_second);

  constexpr std::string_view key = "user:42";
  unsigned admitted = 0;
  bool denied_after_burst = false;
  for (unsigned i = 1; i <= policy.capacity + 1; ++i) {
    const sluice::decision d = limiter.check(key, policy);
    std::printf("check %u: %s remaining=%llu retry_after_ms=%lld\n", i,
                d.allowed ? "allowed" : "denied ", static_cast<unsigned long long>(d.remaining),
                static_cast<long long>(d.retry_after.count()));
    if (d.allowed) {
      ++admitted;
    } else {
      denied_after_burst = i == policy.capacity + 1 && d.retry_after.count() > 0;
    }
  }

  // Invalid input is an error, not a decision: it never reaches a backend.
  std::error_code ec;
  limiter.check("", policy, 1, ec);
  std::printf("empty key: %s\n", ec.message().c_str());

  const bool ok =
      admitted == policy.capacity && denied_after_burst && ec == sluice::errc::empty_key;
  std::printf("%s\n", ok ? "burst admitted, then limited" : "UNEXPECTED");
  return ok ? 0 : 1;
}
