// `sluice`: ask a backend "may this caller spend N tokens now?" from the shell.
// Exit status: 0 allowed, 1 denied, 2 invalid input (message on stderr).
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include <sluice/sluice.hpp>

#include "json_output.hpp"

namespace {

constexpr int exit_allowed = 0;
constexpr int exit_denied = 1;
constexpr int exit_invalid = 2;

struct check_args {
  std::string backend = "memory";
  std::string key;
  std::uint64_t capacity = 0;
  double refill_per_second = 0;
  std::uint64_t cost = 1;
  std::string on_failure = "open";
  int timeout_ms = 50;
  std::string key_prefix = "sluice:";
  unsigned repeat = 1;
};

sluice::limiter make_limiter(const check_args& a) {
  if (a.backend == "memory") return sluice::limiter::in_memory();
  sluice::redis_options o;
  o.url = a.backend;
  o.key_prefix = a.key_prefix;
  o.command_timeout = std::chrono::milliseconds{a.timeout_ms};
  o.connect_timeout = std::chrono::milliseconds{a.timeout_ms};
  return sluice::limiter(sluice::make_redis_backend(std::move(o)));
}

int run_check(const check_args& a) {
  sluice::policy p;
  p.capacity = a.capacity;
  p.refill_per_second = a.refill_per_second;
  const auto mode = sluice::parse_failure_mode(a.on_failure);
  if (!mode) {
    std::cerr << "sluice: --on-failure must be open, closed or local\n";
    return exit_invalid;
  }
  p.on_failure = *mode;
  // Invalid input is reported before any connection is attempted.
  if (auto ec = sluice::validate(a.key, p, a.cost)) {
    std::cerr << "sluice: invalid input: " << ec.message() << "\n";
    return exit_invalid;
  }
  if (std::string why; a.backend != "memory" && !sluice::validate_redis_url(a.backend, &why)) {
    std::cerr << "sluice: --backend must be \"memory\" or a redis://, rediss://, "
                 "redis+cluster:// or redis+sentinel:// URL: "
              << why << "\n";
    return exit_invalid;
  }
  std::optional<sluice::limiter> made;
  try {
    made.emplace(make_limiter(a));
  } catch (const std::invalid_argument& e) {  // e.g. a TLS file that cannot be loaded
    std::cerr << "sluice: --backend: " << e.what() << "\n";
    return exit_invalid;
  }
  auto& lim = *made;
  int status = exit_allowed;
  for (unsigned i = 0; i < a.repeat; ++i) {
    std::error_code ec;
    const auto d = lim.check(a.key, p, a.cost, ec);
    if (ec) {
      std::cerr << "sluice: invalid input: " << ec.message() << "\n";
      return exit_invalid;
    }
    std::cout << sluice::cli::to_json_line(d) << "\n";
    status = d.allowed ? exit_allowed : exit_denied;
  }
  std::cout.flush();
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"sluice: a distributed rate limiter that cannot race"};
  app.set_version_flag("--version", std::string("sluice ") + sluice::version);
  app.require_subcommand(1);

  check_args a;
  auto* check = app.add_subcommand("check", "Decide one request and print it as a JSON line");
  check
      ->add_option("--backend", a.backend,
                   "\"memory\", redis://[[user]:password@]host[:port][/db], "
                   "rediss://...[?ca=FILE&cert=FILE&key=FILE&sni=NAME&verify=yes|no] (TLS), "
                   "redis+cluster://host:port[,host:port...] or "
                   "redis+sentinel://host:port[,...]/MASTER_NAME[?sentinel_password=PW] "
                   "(rediss+cluster://, rediss+sentinel:// for TLS)")
      ->capture_default_str();
  check->add_option("--key", a.key, "Who is spending (e.g. user:42)")->required();
  // Unsigned options would take "-1" as 2^64-1 and fail later with a misleading message.
  check->add_option("--capacity", a.capacity, "Bucket size in tokens (burst)")
      ->required()
      ->check(CLI::Range(std::uint64_t{1}, sluice::max_capacity));
  check->add_option("--refill-per-second", a.refill_per_second, "Tokens added per second")
      ->required();
  check->add_option("--cost", a.cost, "Tokens this request spends")
      ->check(CLI::Range(std::uint64_t{1}, sluice::max_capacity))
      ->capture_default_str();
  check->add_option("--on-failure", a.on_failure, "When Redis fails: open, closed or local")
      ->capture_default_str();
  check->add_option("--timeout-ms", a.timeout_ms, "Connect and command timeout for Redis")
      ->check(CLI::Range(1, 60000))
      ->capture_default_str();
  check->add_option("--key-prefix", a.key_prefix, "Prefix of every Redis key")
      ->capture_default_str();
  bool verbose = false;
  check->add_flag("-v,--verbose", verbose,
                  "Also log what the backend does (connected, failed over) on stderr");
  check->add_option("--repeat", a.repeat, "Decide this many times in one process (one line each)")
      ->check(CLI::Range(1u, 1'000'000u))
      ->capture_default_str();

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::Success& e) {  // --version
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);  // prints the message to stderr
    return exit_invalid;
  }
  // The library's messages go to stderr (stdout is one JSON line a check): warnings and
  // errors ("Redis unreachable"), and with -v what it does (connected, failed over).
  sluice::set_log_sink(&sluice::log_to_stderr,
                       verbose ? sluice::log_level::info : sluice::log_level::warn);
  return run_check(a);
}
