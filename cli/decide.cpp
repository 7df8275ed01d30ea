// `sluice check` and `sluice peek`: one decision per --repeat, each a JSON line on stdout.
#include <iostream>
#include <memory>
#include <string>

#include "commands.hpp"
#include "json_output.hpp"

namespace sluice::cli {

namespace {

enum class decide_kind { check, peek };

struct decide_args {
  backend_flags backend;
  policy_flags policy;
  std::uint64_t cost = 1;
  unsigned repeat = 1;
};

int run_decide(const decide_args& a, decide_kind kind) {
  const auto p = checked_policy(a.policy, a.backend.key, a.cost);
  if (!p) return exit_invalid;
  auto lim = open_limiter(a.backend);
  if (!lim) return exit_invalid;
  int status = exit_allowed;
  for (unsigned i = 0; i < a.repeat; ++i) {
    std::error_code ec;
    const auto d = kind == decide_kind::check ? lim->check(a.backend.key, *p, a.cost, ec)
                                              : lim->peek(a.backend.key, *p, a.cost, ec);
    if (ec) {
      // One write per line: the backend's I/O thread may log a warning at the same moment.
      std::cerr << ("sluice: invalid input: " + ec.message() + "\n");
      return exit_invalid;
    }
    std::cout << to_json_line(d) << "\n";
    status = d.allowed ? exit_allowed : exit_denied;
  }
  std::cout.flush();
  return status;
}

command add_decide_command(CLI::App& app, decide_kind kind) {
  const bool check = kind == decide_kind::check;
  auto* cmd = app.add_subcommand(
      check ? "check" : "peek",
      check ? "Decide one request and print it as a JSON line"
            : "Print what a check would decide now as a JSON line, spending nothing");
  auto a = std::make_shared<decide_args>();
  add_backend_flags(*cmd, a->backend);
  add_policy_flags(*cmd, a->policy);
  add_cost_flag(*cmd, a->cost,
                check ? "What this request spends (tokens, or requests of a window)"
                      : "What the request would spend (tokens, or requests of a window)");
  add_failure_mode_flag(*cmd, a->policy);
  cmd->add_option("--repeat", a->repeat, "Decide this many times in one process (one line each)")
      ->check(CLI::Range(1u, 1'000'000u))
      ->capture_default_str();
  return {cmd, [a, kind] { return run_decide(*a, kind); }};
}

}  // namespace

command add_check_command(CLI::App& app) { return add_decide_command(app, decide_kind::check); }

command add_peek_command(CLI::App& app) { return add_decide_command(app, decide_kind::peek); }

}  // namespace sluice::cli
