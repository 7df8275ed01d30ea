#pragma once
// The `sluice` subcommands; main() registers them and runs the one that was parsed.
#include <CLI/CLI.hpp>

#include "policy_flags.hpp"

namespace sluice::cli {

// `sluice check` (decide and spend) and `sluice peek` (decide, spending nothing): the same
// flags, one JSON line per decision, exit 0 allowed, 1 denied, 2 invalid input.
command add_check_command(CLI::App& app);
command add_peek_command(CLI::App& app);

// `sluice reset`, `refund`, `penalize` and `block`: one key operation, its decision as one
// JSON line, exit 0, 2 invalid input or 3 backend failure.
command add_reset_command(CLI::App& app);
command add_refund_command(CLI::App& app);
command add_penalize_command(CLI::App& app);
command add_block_command(CLI::App& app);

// `sluice acquire`, `release` and `renew`: a concurrency limit's slot, held between commands
// (docs/CONCURRENCY.md). One JSON line; exit 0 acquired / released / renewed, 1 refused / not
// held, 2 invalid input, 3 backend failure.
command add_acquire_command(CLI::App& app);
command add_release_command(CLI::App& app);
command add_renew_command(CLI::App& app);

// `sluice simulate`: a policy against synthetic traffic on a simulated clock.
command add_simulate_command(CLI::App& app);

}  // namespace sluice::cli
