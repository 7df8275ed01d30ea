// sluiced: the Sluice rate-limit daemon. Everything lives in the sluice_daemon library
// (app.hpp); this only wires the process to it.
#include <iostream>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "app.hpp"

int main(int argc, char** argv) {
  // Logs go to stderr: stdout is for the quick-start text.
  spdlog::set_default_logger(spdlog::stderr_color_mt("sluiced"));
  sluice::daemon::app_options opts;
  if (auto code = sluice::daemon::parse_command_line(argc, argv, opts, std::cout, std::cerr)) {
    return *code;
  }
  return sluice::daemon::run(std::move(opts));
}
