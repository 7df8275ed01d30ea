#pragma once
// Runs the daemon: the server on N threads, SIGHUP reloads, SIGTERM/SIGINT drain and exit.
#include <optional>
#include <string>

#include "config.hpp"

namespace sluice::daemon {

struct app_options {
  config cfg;
  /// The file SIGHUP re-reads; empty when running on the built-in default config.
  std::string config_path;
};

/// Serves until SIGTERM or SIGINT, then drains. Returns the process exit code: 0 after a
/// clean drain, 1 when the listen address cannot be bound or the backend cannot be made.
int run(app_options opts);

/// The lines printed on stdout when started without --config.
std::string quick_start_text(const config& c);

}  // namespace sluice::daemon
