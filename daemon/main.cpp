// sluiced: the Sluice rate-limit daemon. Parses the command line, loads the config, runs.
#include <iostream>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <sluice/version.hpp>

#include "app.hpp"
#include "config.hpp"

int main(int argc, char** argv) {
  using namespace sluice::daemon;
  CLI::App cli{"sluiced: rate-limit decisions over HTTP (/v1/check, /v1/auth, /metrics)"};
  std::string config_path, listen, log_level;
  unsigned threads = 0;
  bool check_only = false;
  cli.add_option("-c,--config", config_path, "YAML config file (default: built-in demo config)");
  cli.add_option("-l,--listen", listen, "HOST:PORT to listen on, overriding the config");
  cli.add_option("-t,--threads", threads,
                 "server threads, overriding the config (0: one per core)");
  cli.add_option("--log-level", log_level, "trace|debug|info|warn|error|critical|off");
  cli.add_flag("--check-config", check_only, "validate the config and exit (0 valid, 2 invalid)");
  cli.set_version_flag("-V,--version", std::string("sluiced ") + sluice::version);
  try {
    cli.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return cli.exit(e) == 0 ? 0 : 2;
  }

  // Logs go to stderr: stdout is for the quick-start text.
  spdlog::set_default_logger(spdlog::stderr_color_mt("sluiced"));

  app_options opts;
  opts.config_path = config_path;
  try {
    opts.cfg = config_path.empty() ? default_config() : load_config_file(config_path);
    if (!listen.empty()) {
      try {
        parse_listen(listen, opts.cfg);
      } catch (const std::invalid_argument& e) {
        throw config_error("--listen", 0, "listen", e.what());
      }
    }
  } catch (const config_error& e) {
    std::cerr << e.what() << '\n';
    return 2;
  }
  if (threads) opts.cfg.threads = threads;
  if (!log_level.empty()) opts.cfg.log_level = log_level;
  const auto level = spdlog::level::from_str(opts.cfg.log_level);
  if (level == spdlog::level::off && opts.cfg.log_level != "off") {
    std::cerr << "--log-level: unknown level " << opts.cfg.log_level << '\n';
    return 2;
  }
  spdlog::set_level(level);
  if (check_only) {
    std::cout << opts.cfg.source << ": valid\n";
    return 0;
  }
  return run(std::move(opts));
}
