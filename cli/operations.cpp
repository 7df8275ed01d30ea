// `sluice reset`, `refund`, `penalize` and `block`: one key operation (limiter::operate).
// No failure mode applies to an operation, so a backend that fails exits 3.
#include <iostream>
#include <memory>
#include <string>

#include <sluice/error.hpp>

#include "commands.hpp"
#include "json_output.hpp"

namespace sluice::cli {

namespace {

struct operation_args {
  backend_flags backend;
  policy_flags policy;
  std::uint64_t amount = 1;  // --cost of refund and penalize
  std::string duration;      // --duration of block
};

bool takes_cost(key_operation op) {
  return op == key_operation::refund || op == key_operation::penalize;
}

int run_operation(const operation_args& a, key_operation op) {
  const std::uint64_t cost = takes_cost(op) ? a.amount : 1;
  const auto p = checked_policy(a.policy, a.backend.key, cost);
  if (!p) return exit_invalid;
  std::uint64_t amount = takes_cost(op) ? a.amount : 0;
  if (op == key_operation::block) {
    const auto d = duration_flag("--duration", a.duration);
    if (!d) return exit_invalid;
    if (*d > max_window) {
      std::cerr << "sluice: invalid input: --duration: "
                << make_error_code(errc::invalid_duration).message() << ", got " << a.duration
                << "\n";
      return exit_invalid;
    }
    amount = static_cast<std::uint64_t>(d->count());
  }
  auto lim = open_limiter(a.backend);
  if (!lim) return exit_invalid;
  std::error_code ec;
  const auto d = lim->operate(a.backend.key, *p, op, amount, ec);
  if (ec && is_invalid_input(ec)) {
    // One write per line: the backend's I/O thread may log a warning at the same moment.
    std::cerr << ("sluice: invalid input: " + invalid_input(ec, a.policy, *p, cost) + "\n");
    return exit_invalid;
  }
  if (ec) {
    std::cerr << ("sluice: backend failed: " + ec.message() + "\n");
    return exit_backend_failed;
  }
  std::cout << to_json_line(d) << std::endl;
  return exit_allowed;
}

command add_operation_command(CLI::App& app, key_operation op, const std::string& name,
                              const std::string& description) {
  auto* cmd = app.add_subcommand(name, description);
  auto a = std::make_shared<operation_args>();
  add_backend_flags(*cmd, a->backend);
  add_policy_flags(*cmd, a->policy);
  if (op == key_operation::refund) {
    add_cost_flag(*cmd, a->amount,
                  "What to give back (tokens, or requests of a window); never more than was "
                  "spent");
  } else if (op == key_operation::penalize) {
    add_cost_flag(*cmd, a->amount,
                  "What to spend whatever is left (tokens, or requests of a window)");
  } else if (op == key_operation::block) {
    cmd->add_option("--duration", a->duration,
                    "How long to deny the key: a whole number and a unit ms, s, m, h or d "
                    "(1ms..366d)")
        ->required();
  }
  return {cmd, [a, op] { return run_operation(*a, op); }};
}

}  // namespace

command add_reset_command(CLI::App& app) {
  return add_operation_command(app, key_operation::reset, "reset",
                               "Forget a key (and any block): it decides as a new key");
}

command add_refund_command(CLI::App& app) {
  return add_operation_command(app, key_operation::refund, "refund",
                               "Give back --cost to a key (a request that did not happen)");
}

command add_penalize_command(CLI::App& app) {
  return add_operation_command(app, key_operation::penalize, "penalize",
                               "Spend --cost of a key whatever is left: its client waits longer");
}

command add_block_command(CLI::App& app) {
  return add_operation_command(app, key_operation::block, "block",
                               "Deny a key for --duration whatever its state; then it starts "
                               "afresh");
}

}  // namespace sluice::cli
