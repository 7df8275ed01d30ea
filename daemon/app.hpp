#pragma once
// Runs the daemon: the server on N threads, SIGHUP reloads, SIGTERM/SIGINT drain and exit.
#include <iosfwd>
#include <optional>
#include <string>

#include "config.hpp"

namespace sluice::daemon {

/// What the command line sets over the config file (--listen, --threads, --log-level); kept
/// so that a SIGHUP reload of the file does not undo them.
struct command_line_overrides {
  std::string listen;     ///< empty: the file's
  unsigned threads = 0;   ///< 0: the file's
  std::string log_level;  ///< empty: the file's
  /// Applies them to `c`; throws config_error for a malformed --listen.
  void apply(config& c) const;
};

struct app_options {
  config cfg;
  /// The file SIGHUP re-reads; empty when running on the built-in default config.
  std::string config_path;
  command_line_overrides overrides;
};

/// Parses the command line and loads the config. Returns std::nullopt when the daemon
/// should run with `out`, else the exit code to end with: 0 for --help, --version and a
/// valid --check-config; 2 for a usage error or an invalid config, whose message
/// (`FILE:LINE: field: message`) goes to `err`.
std::optional<int> parse_command_line(int argc, const char* const* argv, app_options& out,
                                      std::ostream& std_out, std::ostream& err);

/// Serves until SIGTERM or SIGINT, then drains. Returns the process exit code: 0 after a
/// clean drain, 1 when the listen address cannot be bound or the backend cannot be made.
int run(app_options opts);

/// The lines printed on stdout when started without --config.
std::string quick_start_text(const config& c);

}  // namespace sluice::daemon
