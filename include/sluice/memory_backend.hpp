#pragma once
/// The in-process backend: the embedded default and the `local` failure-mode fallback.
#include <cstddef>
#include <memory>

#include <sluice/backend.hpp>
#include <sluice/clock.hpp>

namespace sluice {

struct memory_options {
  /// Independent lock shards; more shards, less contention between threads. Capped so
  /// that each shard has at least 64 of max_keys (a max_keys under 128 means one shard).
  std::size_t shards = 64;
  /// The most keys held at once, by all shards together (the memory bound). Keys whose
  /// state decides as a new key would (a full bucket, an ended window) are forgotten first;
  /// when none is found in bounded work, the live key nearest to full is, counted in
  /// backend_stats::evicted_live (docs/library.md, "Memory").
  std::size_t max_keys = 1'000'000;
  /// Time source; default: steady_clock.
  std::shared_ptr<const clock> time_source;
  /// Serve quota leases (backend::async_lease) to the limiters that share this backend, as
  /// Redis does (lua/lease.lua's steps, the askers of a key counted per limiter). Off by
  /// default: a limiter on its own memory backend gains nothing from leasing, so it decides
  /// every check directly. On for simulations of several instances (`sluice simulate
  /// --instances`) and tests.
  bool serve_leases = false;
};

/// A thread-safe, sharded memory backend. decide() takes nanoseconds and never fails.
std::shared_ptr<backend> make_memory_backend(memory_options options = {});

}  // namespace sluice
