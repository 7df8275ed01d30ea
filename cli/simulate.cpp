// `sluice simulate`: a policy against synthetic traffic. The decisions are the library's own
// (limiter::check on a memory backend), on a manual_clock that starts at 0 (so windows
// start at 0) and moves to each request's time, microsecond by microsecond.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include <sluice/clock.hpp>
#include <sluice/limiter.hpp>
#include <sluice/memory_backend.hpp>

#include "commands.hpp"
#include "svg.hpp"
#include "traffic.hpp"

namespace sluice::cli {

namespace {

constexpr std::string_view simulated_key = "simulate";

struct simulate_args {
  policy_flags policy;
  std::uint64_t cost = 1;
  std::string traffic;
  std::string duration = "1m";
  std::uint64_t seed = 1;
  const CLI::Option* seed_option = nullptr;
  std::string svg;
  std::uint64_t instances = 1;
  std::string lease_ttl;
};

// What the summary counts, request by request.
class tally {
 public:
  explicit tally(std::int64_t window_ms) : window_ms_(window_ms) {}

  void add(std::int64_t t_us, bool allowed, std::uint64_t cost) {
    ++requests;
    if (!allowed) {
      ++denied;
      longest_denied_run = std::max(longest_denied_run, ++denied_run_);
      if (!first_denied_us) first_denied_us = t_us;
      return;
    }
    ++this->allowed;
    denied_run_ = 0;
    // Admissions in the window of length window_ms that ends now, (now - window, now], in
    // whole ms as the algorithms count them.
    const std::int64_t ms = t_us / 1000;
    if (!recent_.empty() && recent_.back().first == ms) {
      recent_.back().second += cost;
    } else {
      recent_.emplace_back(ms, cost);
    }
    in_window_ += cost;
    while (recent_.front().first <= ms - window_ms_) {
      in_window_ -= recent_.front().second;
      recent_.pop_front();
    }
    most_in_window = std::max(most_in_window, in_window_);
  }

  std::uint64_t requests = 0;
  std::uint64_t allowed = 0;
  std::uint64_t denied = 0;
  std::uint64_t longest_denied_run = 0;
  std::optional<std::int64_t> first_denied_us;
  std::uint64_t most_in_window = 0;  // units (requests x cost)

 private:
  std::int64_t window_ms_;
  std::uint64_t denied_run_ = 0;
  std::deque<std::pair<std::int64_t, std::uint64_t>> recent_;  // (ms, units admitted then)
  std::uint64_t in_window_ = 0;
};

// A time in µs as JSON milliseconds: an integer when whole.
nlohmann::ordered_json ms_json(std::int64_t us) {
  if (us % 1000 == 0) return us / 1000;
  return static_cast<double>(us) / 1000.0;
}

// "token_bucket: capacity 10, refill 10/s; poisson:15 for 20s (seed 1)"
std::string title_of(const simulate_args& a, const policy& p, const traffic_spec& t) {
  std::string s = std::string(to_string(p.algorithm)) + ": ";
  if (is_window(p.algorithm)) {
    s += "limit " + std::to_string(p.limit) + " per " + a.policy.window;
  } else {
    char rate[32];
    std::snprintf(rate, sizeof rate, "%g", p.refill_per_second);
    s += "capacity " + std::to_string(p.capacity) + ", refill " + rate + "/s";
  }
  if (a.cost != 1) s += ", cost " + std::to_string(a.cost);
  s += "; traffic " + t.text + " for " + a.duration;
  if (t.kind == traffic_spec::shape::poisson) s += " (seed " + std::to_string(a.seed) + ")";
  return s;
}

int run_simulate(const simulate_args& a) {
  auto p = checked_policy(a.policy, simulated_key, a.cost);
  if (!p) return exit_invalid;
  if (!a.lease_ttl.empty()) {
    const auto ttl = duration_flag("--lease-ttl", a.lease_ttl);
    if (!ttl) return exit_invalid;
    if (*ttl > max_lease_ttl) {
      std::cerr << "sluice: --lease-ttl: a lease lasts 1ms..1h, got " << a.lease_ttl << "\n";
      return exit_invalid;
    }
    p->lease_ttl = *ttl;
  }
  std::string why;
  const auto spec = parse_traffic(a.traffic, why);
  if (!spec) {
    std::cerr << "sluice: " << why << "\n";
    return exit_invalid;
  }
  if (a.seed_option->count() > 0 && spec->kind != traffic_spec::shape::poisson) {
    std::cerr << "sluice: --seed is for poisson: traffic only\n";
    return exit_invalid;
  }
  const auto duration = duration_flag("--duration", a.duration);
  if (!duration) return exit_invalid;
  if (*duration > max_window) {
    std::cerr << "sluice: --duration: a simulation lasts 1ms..366d, got " << a.duration << "\n";
    return exit_invalid;
  }
  const std::int64_t duration_us = duration->count() * 1000;
  auto source = traffic_source::make(*spec, duration_us, a.duration, a.seed, why);
  if (!source) {
    std::cerr << "sluice: " << why << "\n";
    return exit_invalid;
  }
  std::ofstream svg_file;
  std::optional<svg_chart> chart;
  if (!a.svg.empty()) {
    // Opened first: a path that cannot be written fails before the work, not after.
    svg_file.open(a.svg, std::ios::binary | std::ios::trunc);
    if (!svg_file) {
      std::cerr << "sluice: --svg: cannot write " << a.svg << ": " << std::strerror(errno) << "\n";
      return exit_invalid;
    }
    chart.emplace(duration_us, limit_of(*p));
  }

  auto clock = std::make_shared<manual_clock>(std::chrono::microseconds{0});
  memory_options options;
  options.shards = 1;
  options.time_source = clock;
  // Several instances share the backend, as processes share Redis; with --lease-ttl each
  // takes leases from it as from Redis (docs/LEASES.md).
  options.serve_leases = p->lease_ttl.count() > 0;
  const auto shared = make_memory_backend(std::move(options));
  std::vector<limiter> instances;
  for (std::uint64_t i = 0; i < a.instances; ++i) instances.emplace_back(shared, nullptr, clock);
  // Buckets have no window: the busiest second is what they are compared by.
  const std::int64_t window_ms = is_window(p->algorithm) ? p->window.count() : 1000;
  tally t(window_ms);
  for (std::int64_t at = 0; source->next(at);) {
    if (t.requests == max_simulated_requests) {
      std::cerr << "sluice: --traffic " << spec->text
                << ": more requests than a simulation takes (10000000) in --duration " << a.duration
                << "\n";
      return exit_invalid;
    }
    clock->set(std::chrono::microseconds{at});
    std::error_code ec;
    // Requests take turns over the instances, as a load balancer's round robin.
    auto& lim = instances[t.requests % instances.size()];
    const auto d = lim.check(simulated_key, *p, a.cost, ec);
    if (ec) {
      std::cerr << "sluice: invalid input: " << invalid_input(ec, a.policy, *p, a.cost) << "\n";
      return exit_invalid;
    }
    t.add(at, d.allowed, a.cost);
    if (chart) chart->add(at, d.allowed, d.remaining);
  }

  nlohmann::ordered_json j;
  j["algorithm"] = std::string(to_string(p->algorithm));
  j["traffic"] = spec->text;
  j["duration_ms"] = duration->count();
  j["requests"] = t.requests;
  j["allowed"] = t.allowed;
  j["denied"] = t.denied;
  j["longest_denied_run"] = t.longest_denied_run;
  j["first_denied_ms"] = t.first_denied_us ? ms_json(*t.first_denied_us) : nullptr;
  j["window_ms"] = window_ms;
  j["max_allowed_in_any_window"] = t.most_in_window;
  if (a.instances > 1 || p->lease_ttl.count() > 0) {
    j["instances"] = a.instances;
    j["lease_ttl_ms"] = p->lease_ttl.count();
    std::uint64_t leases = 0, leased = 0;
    for (const auto& l : instances) {
      const auto st = l.stats();
      leases += st.leases + st.lease_denials;
      leased += st.leased_decisions;
    }
    j["lease_asks"] = leases;
    j["leased_decisions"] = leased;
    // What leases may add to any window, at most: the limit's rate x lease_ttl (docs/LEASES.md;
    // fixed windows add nothing to an aligned window).
    const double rate = is_window(p->algorithm) ? static_cast<double>(p->limit) * 1000.0 /
                                                      static_cast<double>(p->window.count())
                                                : p->refill_per_second;
    j["lease_bound_extra"] = static_cast<std::uint64_t>(
        std::ceil(rate * static_cast<double>(p->lease_ttl.count()) / 1000.0));
  }
  if (chart) {
    svg_file << chart->render(title_of(a, *p, *spec), t.allowed, t.denied);
    svg_file.close();
    if (!svg_file) {
      std::cerr << "sluice: --svg: cannot write " << a.svg << ": " << std::strerror(errno) << "\n";
      return exit_invalid;
    }
  }
  std::cout << j.dump() << std::endl;
  return exit_allowed;
}

}  // namespace

command add_simulate_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "simulate",
      "Run a policy against synthetic traffic on a simulated clock and print a JSON summary "
      "(the library's own decisions, on a memory backend)");
  auto a = std::make_shared<simulate_args>();
  add_policy_flags(*cmd, a->policy);
  add_cost_flag(*cmd, a->cost, "What each request spends (tokens, or requests of a window)");
  cmd->add_option("--traffic", a->traffic,
                  "steady:RATE (evenly spaced), burst:N@PERIOD (N at once every PERIOD), "
                  "poisson:RATE (random arrivals) or file:PATH (a request time in ms from 0 a "
                  "line; # comments); RATE in requests per second")
      ->required();
  cmd->add_option("--duration", a->duration,
                  "How long the traffic lasts: a whole number and a unit ms, s, m, h or d")
      ->capture_default_str();
  a->seed_option = cmd->add_option("--seed", a->seed, "poisson: the random generator's seed")
                       ->capture_default_str();
  cmd->add_option("--instances", a->instances,
                  "Instances (limiters) sharing the limit, as processes share Redis; requests "
                  "take turns over them")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  cmd->add_option("--lease-ttl", a->lease_ttl,
                  "Quota leases: each instance decides from leases valid this long (e.g. "
                  "50ms), as with policy lease_ttl on Redis");
  cmd->add_option("--svg", a->svg,
                  "Also draw the decisions into this SVG file (allowed and denied over time, "
                  "and the remaining budget)");
  return {cmd, [a] { return run_simulate(*a); }};
}

}  // namespace sluice::cli
