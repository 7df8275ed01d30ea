// sluiced: the Sluice rate-limit daemon. Everything lives in the sluice_daemon library
// (app.hpp); this only wires the process to it.
#include <iostream>

#include <spdlog/spdlog.h>

#include "app.hpp"
#include "safe_log.hpp"

int main(int argc, char** argv) {
  // Logs go to stderr (stdout is for the quick-start text), escaped: they quote requests.
  spdlog::set_default_logger(sluice::daemon::make_daemon_logger("sluiced"));
  sluice::daemon::app_options opts;
  if (auto code = sluice::daemon::parse_command_line(argc, argv, opts, std::cout, std::cerr)) {
    return *code;
  }
  return sluice::daemon::run(std::move(opts));
}
