// `sluice`: ask a backend "may this caller spend N now?" from the shell with any of the five
// algorithms (check, peek), act on a key (reset, refund, penalize, block), or try a policy
// on synthetic traffic (simulate).
// Exit status: 0 allowed (or done), 1 denied, 2 invalid input (message on stderr), 3 a key
// operation's backend failed.
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include <sluice/version.hpp>

#include "commands.hpp"

int main(int argc, char** argv) {
  namespace cli = sluice::cli;
  CLI::App app{"sluice: a distributed rate limiter that cannot race"};
  app.set_version_flag("--version", std::string("sluice ") + sluice::version);
  app.require_subcommand(1);
  const std::vector<cli::command> commands{
      cli::add_check_command(app),    cli::add_peek_command(app),     cli::add_reset_command(app),
      cli::add_refund_command(app),   cli::add_penalize_command(app), cli::add_block_command(app),
      cli::add_simulate_command(app), cli::add_acquire_command(app),  cli::add_release_command(app),
      cli::add_renew_command(app),
  };
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
    return cli::exit_invalid;
  }
  for (const auto& c : commands) {
    if (c.app->parsed()) return c.run();
  }
  return cli::exit_invalid;  // unreachable: require_subcommand(1)
}
