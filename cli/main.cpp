// `sluice`: ask a backend "may this caller spend N tokens now?" from the shell, with any of
// the five algorithms.
// Exit status: 0 allowed, 1 denied, 2 invalid input (message on stderr).
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include <CLI/CLI.hpp>

#include <sluice/http/duration.hpp>
#include <sluice/sluice.hpp>

#include "json_output.hpp"

namespace {

constexpr int exit_allowed = 0;
constexpr int exit_denied = 1;
constexpr int exit_invalid = 2;

struct check_args {
  std::string backend = "memory";
  std::string key;
  std::string algorithm = "token_bucket";
  // Buckets (token_bucket, gcra).
  std::uint64_t capacity = 0;
  double refill_per_second = 0;
  // Windows (sliding_window, sliding_window_counter, fixed_window).
  std::uint64_t limit = 0;
  std::string window;
  // Which of the algorithm's flags were given: a flag of the other family is an error, not
  // something to ignore silently.
  bool capacity_given = false;
  bool refill_given = false;
  bool limit_given = false;
  bool window_given = false;
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

constexpr std::string_view algorithms =
    "token_bucket, gcra, sliding_window, sliding_window_counter or fixed_window";

// The policy the flags describe, or std::nullopt with the reason (naming the flag) in `why`.
std::optional<sluice::policy> policy_of(const check_args& a, std::string& why) {
  const auto alg = sluice::parse_algorithm(a.algorithm);
  if (!alg) {
    why = "--algorithm must be " + std::string(algorithms) + ", got \"" + a.algorithm + "\"";
    return std::nullopt;
  }
  const auto with = " with --algorithm " + a.algorithm;
  sluice::policy p;
  p.algorithm = *alg;
  auto fail = [&](std::string reason) {
    why = std::move(reason);
    return std::nullopt;
  };
  // A flag of the other family first: it says what was meant better than a missing one.
  if (sluice::is_window(*alg)) {
    const auto takes = "; " + a.algorithm + " takes --limit and --window";
    if (a.capacity_given) return fail("--capacity is for token_bucket and gcra" + takes);
    if (a.refill_given) return fail("--refill-per-second is for token_bucket and gcra" + takes);
    if (!a.limit_given) return fail("--limit is required" + with);
    if (!a.window_given) return fail("--window is required" + with + " (e.g. --window 1m)");
    std::string bad_window;
    const auto w = sluice::http::parse_duration(a.window, &bad_window);
    if (!w) return fail("--window: " + bad_window);
    p.limit = a.limit;
    p.window = *w;
  } else {
    const auto takes = "; " + a.algorithm + " takes --capacity and --refill-per-second";
    const std::string windows = " is for sliding_window, sliding_window_counter and fixed_window";
    if (a.limit_given) return fail("--limit" + windows + takes);
    if (a.window_given) return fail("--window" + windows + takes);
    if (!a.capacity_given) return fail("--capacity is required" + with);
    if (!a.refill_given) return fail("--refill-per-second is required" + with);
    p.capacity = a.capacity;
    p.refill_per_second = a.refill_per_second;
  }
  const auto mode = sluice::parse_failure_mode(a.on_failure);
  if (!mode)
    return fail("--on-failure must be open, closed or local, got \"" + a.on_failure + "\"");
  p.on_failure = *mode;
  return p;
}

// validate()'s verdict on the flags, naming the flag that is wrong.
std::string invalid_input(std::error_code ec, const check_args& a, const sluice::policy& p) {
  using sluice::errc;
  const auto bound = sluice::is_window(p.algorithm) ? "--limit " : "--capacity ";
  switch (static_cast<errc>(ec.value())) {
    case errc::invalid_capacity:
      return "--capacity: " + ec.message();
    case errc::invalid_refill_rate:
    case errc::invalid_gcra_rate:
      return "--refill-per-second: " + ec.message();
    case errc::invalid_limit:
      return "--limit: " + ec.message();
    case errc::invalid_window:
      return "--window: " + ec.message() + ", got " + a.window;
    case errc::empty_key:
    case errc::key_too_long:
      return "--key: " + ec.message();
    case errc::invalid_cost:
      return "--cost: " + ec.message();
    case errc::cost_exceeds_capacity:
      return "--cost " + std::to_string(a.cost) + " exceeds " + bound +
             std::to_string(sluice::limit_of(p)) + " (a request may cost at most that)";
    default:
      return ec.message();
  }
}

int run_check(const check_args& a) {
  // Invalid input is reported before any connection is attempted.
  std::string reason;
  const auto policy = policy_of(a, reason);
  if (!policy) {
    std::cerr << "sluice: " << reason << "\n";
    return exit_invalid;
  }
  const auto& p = *policy;
  if (auto ec = sluice::validate(a.key, p, a.cost)) {
    std::cerr << "sluice: invalid input: " << invalid_input(ec, a, p) << "\n";
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
  check
      ->add_option("--algorithm", a.algorithm,
                   "token_bucket or gcra (with --capacity and --refill-per-second), "
                   "sliding_window, sliding_window_counter or fixed_window (with --limit and "
                   "--window); docs/ALGORITHMS.md compares them")
      ->capture_default_str();
  // Unsigned options would take "-1" as 2^64-1 and fail later with a misleading message.
  auto* capacity = check
                       ->add_option("--capacity", a.capacity,
                                    "token_bucket, gcra: bucket size in tokens (burst)")
                       ->check(CLI::Range(std::uint64_t{1}, sluice::max_capacity));
  auto* refill = check->add_option("--refill-per-second", a.refill_per_second,
                                   "token_bucket, gcra: tokens added per second");
  auto* limit =
      check->add_option("--limit", a.limit, "Windows: requests (in cost units) per window")
          ->check(CLI::Range(std::uint64_t{1}, sluice::max_capacity));
  auto* window = check->add_option(
      "--window", a.window,
      "Windows: the window's length, a whole number and a unit ms, s, m, h or d (250ms, 1m, 1d)");
  check->add_option("--cost", a.cost, "What this request spends (tokens, or requests of a window)")
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
  a.capacity_given = capacity->count() > 0;
  a.refill_given = refill->count() > 0;
  a.limit_given = limit->count() > 0;
  a.window_given = window->count() > 0;
  // The library's messages go to stderr (stdout is one JSON line a check): warnings and
  // errors ("Redis unreachable"), and with -v what it does (connected, failed over).
  sluice::set_log_sink(&sluice::log_to_stderr,
                       verbose ? sluice::log_level::info : sluice::log_level::warn);
  return run_check(a);
}
