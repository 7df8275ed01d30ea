// `sluice acquire`, `release` and `renew`: a concurrency limit's slot for scripts. acquire
// prints the slot's id and leaves it held (detached) for a later `sluice release` (or until
// its lease ends), so a shell script can bracket a job:
//
//   slot=$(sluice acquire --backend "$URL" --key reports --limit 4 --lease-ttl 10m | jq -r .slot)
//   run-report; sluice release --backend "$URL" --key reports --slot "$slot"
#include <iostream>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include <sluice/concurrency.hpp>
#include <sluice/error.hpp>

#include "commands.hpp"

namespace sluice::cli {
namespace {

struct slot_args {
  backend_flags backend;
  std::uint64_t limit = 1;
  std::string lease_ttl = "30s";
  std::string wait;  // empty: one attempt
  std::string on_failure = "open";
  std::string slot;
};

// The policy the flags describe, or std::nullopt once the reason has been printed.
std::optional<concurrency_policy> slot_policy(const slot_args& a) {
  concurrency_policy p;
  p.limit = a.limit;
  const auto ttl = duration_flag("--lease-ttl", a.lease_ttl);
  if (!ttl) return std::nullopt;
  p.lease_ttl = *ttl;
  const auto mode = parse_failure_mode(a.on_failure);
  if (!mode) {
    std::cerr << "sluice: --on-failure: want open, closed or local, got " << a.on_failure << "\n";
    return std::nullopt;
  }
  p.on_failure = *mode;
  if (auto ec = validate(a.backend.key, p)) {
    const char* flag = ec == errc::invalid_limit       ? "--limit"
                       : ec == errc::invalid_lease_ttl ? "--lease-ttl"
                                                       : "--key";
    std::cerr << ("sluice: invalid input: " + std::string(flag) + ": " + ec.message() + "\n");
    return std::nullopt;
  }
  return p;
}

int run_acquire(const slot_args& a) {
  const auto p = slot_policy(a);
  if (!p) return exit_invalid;
  std::optional<std::chrono::milliseconds> wait = std::chrono::milliseconds{0};
  if (!a.wait.empty()) wait = duration_flag("--wait", a.wait);
  if (!wait) return exit_invalid;
  auto lim = open_limiter(a.backend);
  if (!lim) return exit_invalid;
  std::error_code ec;
  auto s = lim->acquire(a.backend.key, *p, *wait, ec);
  if (ec) {
    std::cerr << ("sluice: invalid input: " + ec.message() + "\n");
    return exit_invalid;
  }
  nlohmann::json j;
  j["acquired"] = static_cast<bool>(s);
  j["degraded"] = s.degraded();
  j["in_flight"] = s.in_flight();
  j["limit"] = s.limit();
  if (s) {
    j["expires_in_ms"] = s.expires_in().count();
    const auto id = s.detach();  // held until `sluice release` or the lease's end
    j["slot"] = id.empty() ? nlohmann::json(nullptr) : nlohmann::json(id);
  } else {
    j["retry_after_ms"] = s.retry_after().count();
  }
  std::cout << j.dump() << std::endl;
  return j["acquired"].get<bool>() ? exit_allowed : exit_denied;
}

int run_step(const slot_args& a, slot_operation op) {
  const auto p = slot_policy(a);
  if (!p) return exit_invalid;
  auto lim = open_limiter(a.backend);
  if (!lim) return exit_invalid;
  std::error_code ec;
  const auto r = lim->slot_step(a.backend.key, *p, op, a.slot, ec);
  if (ec && is_invalid_input(ec)) {
    std::cerr << ("sluice: invalid input: --slot: " + ec.message() + "\n");
    return exit_invalid;
  }
  if (ec) {
    std::cerr << ("sluice: backend failed: " + ec.message() + "\n");
    return exit_backend_failed;
  }
  nlohmann::json j;
  j[op == slot_operation::release ? "released" : "renewed"] = r.held;
  j["in_flight"] = r.in_flight;
  if (op == slot_operation::renew && r.held) j["expires_in_ms"] = r.expires_in.count();
  std::cout << j.dump() << std::endl;
  return r.held ? exit_allowed : exit_denied;
}

command add_slot_command(CLI::App& app, slot_operation op) {
  const bool acquire = op == slot_operation::acquire;
  auto* cmd = app.add_subcommand(
      acquire ? "acquire" : (op == slot_operation::release ? "release" : "renew"),
      acquire ? "Take a slot of a concurrency limit and leave it held: prints its id (exit 0), "
                "or the refusal (exit 1)"
      : op == slot_operation::release
          ? "Give back a slot that `sluice acquire` took (exit 1: it was not held)"
          : "Extend a slot's lease by --lease-ttl from now (exit 1: its lease had ended)");
  auto a = std::make_shared<slot_args>();
  add_backend_flags(*cmd, a->backend);
  cmd->add_option("--limit", a->limit, "At most this many holders of the key at once")
      ->capture_default_str();
  cmd->add_option("--lease-ttl", a->lease_ttl,
                  "How long a slot is held unless renewed: a whole number and a unit ms, s, m "
                  "or h (1ms..1h)")
      ->capture_default_str();
  if (acquire) {
    cmd->add_option("--wait", a->wait,
                    "How long to wait for a slot when the limit is reached (e.g. 5s); default: "
                    "one attempt");
    cmd->add_option("--on-failure", a->on_failure,
                    "When the backend fails: open (a slot no backend holds), closed (refused) "
                    "or local (this process's memory)")
        ->capture_default_str();
  } else {
    cmd->add_option("--slot", a->slot, "The slot's id, as `sluice acquire` printed it")->required();
  }
  return {cmd,
          [a, op] { return op == slot_operation::acquire ? run_acquire(*a) : run_step(*a, op); }};
}

}  // namespace

command add_acquire_command(CLI::App& app) {
  return add_slot_command(app, slot_operation::acquire);
}
command add_release_command(CLI::App& app) {
  return add_slot_command(app, slot_operation::release);
}
command add_renew_command(CLI::App& app) { return add_slot_command(app, slot_operation::renew); }

}  // namespace sluice::cli
