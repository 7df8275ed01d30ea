#pragma once
// The flags every `sluice` command shares, registered and validated in one place: the policy
// (--algorithm and its parameters), --cost, and the backend (--backend, --key, ...).
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include <CLI/CLI.hpp>

#include <sluice/limiter.hpp>
#include <sluice/policy.hpp>

namespace sluice::cli {

// Exit status of every command.
inline constexpr int exit_allowed = 0;  // also: an operation or a simulation succeeded
inline constexpr int exit_denied = 1;
inline constexpr int exit_invalid = 2;         // invalid input, message on stderr
inline constexpr int exit_backend_failed = 3;  // a key operation's backend failed

// A subcommand as main() runs it: its CLI11 app, and what to do once it has been parsed.
struct command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

// --algorithm and its parameters (and --on-failure where a command registers it).
struct policy_flags {
  std::string algorithm = "token_bucket";
  // Buckets (token_bucket, gcra).
  std::uint64_t capacity = 0;
  double refill_per_second = 0;
  // Windows (sliding_window, sliding_window_counter, fixed_window).
  std::uint64_t limit = 0;
  std::string window;
  std::string on_failure = "open";
  // The options, to tell a flag given from its default: a flag of the other family is an
  // error, not something to ignore silently.
  const CLI::Option* capacity_option = nullptr;
  const CLI::Option* refill_option = nullptr;
  const CLI::Option* limit_option = nullptr;
  const CLI::Option* window_option = nullptr;
};

// Registers --algorithm, --capacity, --refill-per-second, --limit and --window on `cmd`.
void add_policy_flags(CLI::App& cmd, policy_flags& f);
// Registers --on-failure (for the commands that decide: check and peek).
void add_failure_mode_flag(CLI::App& cmd, policy_flags& f);
// Registers --cost (1..max_capacity, default 1) with `description`.
void add_cost_flag(CLI::App& cmd, std::uint64_t& cost, const std::string& description);

// The policy the flags describe, or std::nullopt with the reason (naming the flag) in `why`.
std::optional<policy> policy_of(const policy_flags& f, std::string& why);

// validate()'s verdict on the flags, naming the flag that is wrong (`cost`: --cost's value).
std::string invalid_input(std::error_code ec, const policy_flags& f, const policy& p,
                          std::uint64_t cost);

// policy_of(), then validate(key, p, cost): the policy, or std::nullopt once the reason has
// been printed on stderr (the command exits exit_invalid).
std::optional<policy> checked_policy(const policy_flags& f, std::string_view key,
                                     std::uint64_t cost);

// Where the key lives: --backend, --key, --timeout-ms, --key-prefix, -v.
struct backend_flags {
  std::string backend = "memory";
  std::string key;
  int timeout_ms = 50;
  std::string key_prefix = "sluice:";
  bool verbose = false;
};

// Registers the backend flags on `cmd` (--key is required).
void add_backend_flags(CLI::App& cmd, backend_flags& f);

// Routes the library's log to stderr (info with -v), checks --backend and makes the limiter;
// std::nullopt once the reason has been printed on stderr (the command exits exit_invalid).
std::optional<limiter> open_limiter(const backend_flags& f);

// A DURATION flag's value (parse_duration), or std::nullopt once "sluice: FLAG: why" has
// been printed on stderr.
std::optional<std::chrono::milliseconds> duration_flag(std::string_view flag,
                                                       const std::string& text);

}  // namespace sluice::cli
