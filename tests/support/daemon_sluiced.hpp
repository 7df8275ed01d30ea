#pragma once
/// A real `sluiced` process on a free loopback port, for integration tests.
///
///   sluice::test::sluiced_process d(R"(policies: {api: {capacity: 5, refill_per_second: 1}})");
///   auto r = sluice::test::post_check(d.port(), R"({"key":"k","policy":"api"})");
///
/// The YAML is written to a config file in a temporary directory; `listen` is set from the
/// command line (--listen 127.0.0.1:<free port>). Ready once GET /healthz answers 200.
/// Killed (SIGKILL) when destroyed unless it has exited. Not thread-safe.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "support/process_child.hpp"

namespace sluice::test {

/// The sluiced binary under test: $SLUICE_SLUICED when set (e.g. a sanitizer build), else
/// the one from this build.
std::string sluiced_path();

class sluiced_process {
 public:
  /// Starts sluiced with `yaml` as its config (std::nullopt: no --config, the built-in
  /// default) and `extra_args`. Throws std::runtime_error with its stderr if it does not
  /// become healthy.
  explicit sluiced_process(std::optional<std::string> yaml,
                           std::vector<std::string> extra_args = {});
  ~sluiced_process();
  sluiced_process(const sluiced_process&) = delete;
  sluiced_process& operator=(const sluiced_process&) = delete;

  std::uint16_t port() const noexcept { return port_; }
  const std::string& config_path() const noexcept { return config_path_; }
  process_child& process() { return *child_; }

  /// Rewrites the config file (e.g. before SIGHUP).
  void write_config(const std::string& yaml);
  /// Sends SIGHUP and waits until sluiced logged the reload outcome (applied or rejected).
  /// Returns true when it was applied.
  bool reload(std::chrono::milliseconds within = std::chrono::seconds{10});

 private:
  std::string dir_;
  std::string config_path_;
  std::uint16_t port_ = 0;
  std::unique_ptr<process_child> child_;
};

}  // namespace sluice::test
