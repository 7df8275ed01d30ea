#include "policy_flags.hpp"

#include <iostream>
#include <stdexcept>
#include <utility>

#include <sluice/error.hpp>
#include <sluice/http/duration.hpp>
#include <sluice/log.hpp>
#include <sluice/redis_backend.hpp>
#include <sluice/redis_cluster.hpp>

namespace sluice::cli {

namespace {

constexpr std::string_view algorithms =
    "token_bucket, gcra, sliding_window, sliding_window_counter or fixed_window";

bool given(const CLI::Option* o) { return o != nullptr && o->count() > 0; }

}  // namespace

void add_policy_flags(CLI::App& cmd, policy_flags& f) {
  cmd.add_option("--algorithm", f.algorithm,
                 "token_bucket or gcra (with --capacity and --refill-per-second), "
                 "sliding_window, sliding_window_counter or fixed_window (with --limit and "
                 "--window); docs/ALGORITHMS.md compares them")
      ->capture_default_str();
  // Unsigned options would take "-1" as 2^64-1 and fail later with a misleading message.
  f.capacity_option =
      cmd.add_option("--capacity", f.capacity, "token_bucket, gcra: bucket size in tokens (burst)")
          ->check(CLI::Range(std::uint64_t{1}, sluice::max_capacity));
  f.refill_option = cmd.add_option("--refill-per-second", f.refill_per_second,
                                   "token_bucket, gcra: tokens added per second");
  f.limit_option =
      cmd.add_option("--limit", f.limit, "Windows: requests (in cost units) per window")
          ->check(CLI::Range(std::uint64_t{1}, sluice::max_capacity));
  f.window_option = cmd.add_option(
      "--window", f.window,
      "Windows: the window's length, a whole number and a unit ms, s, m, h or d (250ms, 1m, 1d)");
}

void add_failure_mode_flag(CLI::App& cmd, policy_flags& f) {
  cmd.add_option("--on-failure", f.on_failure, "When Redis fails: open, closed or local")
      ->capture_default_str();
}

void add_cost_flag(CLI::App& cmd, std::uint64_t& cost, const std::string& description) {
  cmd.add_option("--cost", cost, description)
      ->check(CLI::Range(std::uint64_t{1}, sluice::max_capacity))
      ->capture_default_str();
}

std::optional<policy> policy_of(const policy_flags& f, std::string& why) {
  const auto alg = sluice::parse_algorithm(f.algorithm);
  if (!alg) {
    why = "--algorithm must be " + std::string(algorithms) + ", got \"" + f.algorithm + "\"";
    return std::nullopt;
  }
  const auto with = " with --algorithm " + f.algorithm;
  sluice::policy p;
  p.algorithm = *alg;
  auto fail = [&](std::string reason) {
    why = std::move(reason);
    return std::nullopt;
  };
  // A flag of the other family first: it says what was meant better than a missing one.
  if (sluice::is_window(*alg)) {
    const auto takes = "; " + f.algorithm + " takes --limit and --window";
    if (given(f.capacity_option)) return fail("--capacity is for token_bucket and gcra" + takes);
    if (given(f.refill_option)) {
      return fail("--refill-per-second is for token_bucket and gcra" + takes);
    }
    if (!given(f.limit_option)) return fail("--limit is required" + with);
    if (!given(f.window_option)) {
      return fail("--window is required" + with + " (e.g. --window 1m)");
    }
    std::string bad_window;
    const auto w = sluice::http::parse_duration(f.window, &bad_window);
    if (!w) return fail("--window: " + bad_window);
    p.limit = f.limit;
    p.window = *w;
  } else {
    const auto takes = "; " + f.algorithm + " takes --capacity and --refill-per-second";
    const std::string windows = " is for sliding_window, sliding_window_counter and fixed_window";
    if (given(f.limit_option)) return fail("--limit" + windows + takes);
    if (given(f.window_option)) return fail("--window" + windows + takes);
    if (!given(f.capacity_option)) return fail("--capacity is required" + with);
    if (!given(f.refill_option)) return fail("--refill-per-second is required" + with);
    p.capacity = f.capacity;
    p.refill_per_second = f.refill_per_second;
  }
  const auto mode = sluice::parse_failure_mode(f.on_failure);
  if (!mode) {
    return fail("--on-failure must be open, closed or local, got \"" + f.on_failure + "\"");
  }
  p.on_failure = *mode;
  return p;
}

std::string invalid_input(std::error_code ec, const policy_flags& f, const policy& p,
                          std::uint64_t cost) {
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
      return "--window: " + ec.message() + ", got " + f.window;
    case errc::empty_key:
    case errc::key_too_long:
      return "--key: " + ec.message();
    case errc::invalid_cost:
      return "--cost: " + ec.message();
    case errc::cost_exceeds_capacity:
      return "--cost " + std::to_string(cost) + " exceeds " + bound +
             std::to_string(sluice::limit_of(p)) + " (a request may cost at most that)";
    default:
      return ec.message();
  }
}

std::optional<policy> checked_policy(const policy_flags& f, std::string_view key,
                                     std::uint64_t cost) {
  // Invalid input is reported before any connection is attempted.
  std::string reason;
  const auto p = policy_of(f, reason);
  if (!p) {
    std::cerr << "sluice: " << reason << "\n";
    return std::nullopt;
  }
  if (auto ec = sluice::validate(key, *p, cost)) {
    std::cerr << "sluice: invalid input: " << invalid_input(ec, f, *p, cost) << "\n";
    return std::nullopt;
  }
  return p;
}

void add_backend_flags(CLI::App& cmd, backend_flags& f) {
  cmd.add_option("--backend", f.backend,
                 "\"memory\", redis://[[user]:password@]host[:port][/db], "
                 "rediss://...[?ca=FILE&cert=FILE&key=FILE&sni=NAME&verify=yes|no] (TLS), "
                 "redis+cluster://host:port[,host:port...] or "
                 "redis+sentinel://host:port[,...]/MASTER_NAME[?sentinel_password=PW] "
                 "(rediss+cluster://, rediss+sentinel:// for TLS)")
      ->capture_default_str();
  cmd.add_option("--key", f.key, "Who is spending (e.g. user:42)")->required();
  cmd.add_option("--timeout-ms", f.timeout_ms, "Connect and command timeout for Redis")
      ->check(CLI::Range(1, 60000))
      ->capture_default_str();
  cmd.add_option("--key-prefix", f.key_prefix, "Prefix of every Redis key")->capture_default_str();
  cmd.add_flag("-v,--verbose", f.verbose,
               "Also log what the backend does (connected, failed over) on stderr");
}

std::optional<limiter> open_limiter(const backend_flags& f) {
  // The library's messages go to stderr (stdout is one JSON line a decision): warnings and
  // errors ("Redis unreachable"), and with -v what it does (connected, failed over).
  sluice::set_log_sink(&sluice::log_to_stderr,
                       f.verbose ? sluice::log_level::info : sluice::log_level::warn);
  if (f.backend == "memory") return sluice::limiter::in_memory();
  if (std::string why; !sluice::validate_redis_url(f.backend, &why)) {
    std::cerr << "sluice: --backend must be \"memory\" or a redis://, rediss://, "
                 "redis+cluster:// or redis+sentinel:// URL: "
              << why << "\n";
    return std::nullopt;
  }
  sluice::redis_options o;
  o.url = f.backend;
  o.key_prefix = f.key_prefix;
  o.command_timeout = std::chrono::milliseconds{f.timeout_ms};
  o.connect_timeout = std::chrono::milliseconds{f.timeout_ms};
  try {
    return sluice::limiter(sluice::make_redis_backend(o.url, o));
  } catch (const std::invalid_argument& e) {  // e.g. a TLS file that cannot be loaded
    std::cerr << "sluice: --backend: " << e.what() << "\n";
    return std::nullopt;
  }
}

std::optional<std::chrono::milliseconds> duration_flag(std::string_view flag,
                                                       const std::string& text) {
  std::string why;
  const auto d = sluice::http::parse_duration(text, &why);
  if (!d) std::cerr << "sluice: " << flag << ": " << why << "\n";
  return d;
}

}  // namespace sluice::cli
