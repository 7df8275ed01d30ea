// Built by tests/cmake/find_package and tests/cmake/add_subdirectory: uses the public API the
// way a user would (blocking and asynchronous checks, error codes, the version header), so a
// missing header, dependency or link flag in either way of consuming Sluice fails the build,
// and wrong behaviour fails the run.
#include <cstdio>
#include <cstring>
#include <system_error>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/io_context.hpp>
#include <sluice/sluice.hpp>

int main() {
  int failures = 0;
  auto expect = [&failures](bool ok, const char* what) {
    std::printf("%s: %s\n", ok ? "ok  " : "FAIL", what);
    if (!ok) ++failures;
  };

  expect(std::strcmp(sluice::version, SLUICE_EXPECTED_VERSION) == 0,
         "sluice::version matches the package version");

  sluice::limiter limiter = sluice::limiter::in_memory();
  sluice::policy policy;
  policy.capacity = 2;
  policy.refill_per_second = 1.0;

  expect(limiter.check("consumer", policy).allowed, "first check allowed");

  // The asynchronous check completes on the io_context, never inline.
  boost::asio::io_context io;
  bool completed = false;
  sluice::decision async_decision;
  limiter.async_check("consumer", policy, 1,
                      boost::asio::bind_executor(io, [&](std::error_code ec, sluice::decision d) {
                        completed = !ec;
                        async_decision = d;
                      }));
  expect(!completed, "async handler did not run inline");
  io.run();
  expect(completed && async_decision.allowed && async_decision.remaining == 0,
         "async check allowed the second token");

  const sluice::decision denied = limiter.check("consumer", policy);
  expect(!denied.allowed && denied.retry_after.count() > 0, "third check denied with a retry time");

  std::error_code ec;
  limiter.check("consumer", policy, 3, ec);
  expect(ec == sluice::errc::cost_exceeds_capacity, "cost over capacity rejected");

  return failures == 0 ? 0 : 1;
}
