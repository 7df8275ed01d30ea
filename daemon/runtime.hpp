#pragma once
// One config in force and what it built: the rules, the limiter (or one per server thread)
// and the backend's counters summed over them. service (service.hpp) builds one at start-up
// and on each reload (runtime.cpp), and every request reads the one in force.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>

#include <sluice/http/rules.hpp>
#include <sluice/limiter.hpp>

#include "config.hpp"

namespace sluice::daemon {

/// One config in force: immutable; a reload builds a new one and swaps the pointer.
struct runtime {
  config cfg;
  std::shared_ptr<const http::rule_set> rules;
  /// Shared by successive runtimes while the backend settings stay the same, so a reload
  /// keeps the memory backend's buckets and the Redis connection.
  std::shared_ptr<limiter> lim;
  /// On a standalone Redis backend, one limiter per server thread, each with its own
  /// connection that the thread's io_context runs (redis_options::run_on): a check then
  /// never hands off to another thread. `lim` is the first of them. Empty otherwise.
  std::vector<std::pair<boost::asio::io_context*, std::shared_ptr<limiter>>> thread_limiters;
  bool memory_backend = true;

  /// The limiter for a check made on this thread: its own, or `lim` off the server threads.
  limiter& limiter_here() const noexcept;
  /// The backend's counters, summed over the per-thread connections.
  sluice::backend_stats backend_stats() const noexcept;
  /// The limiters' counters, summed over the per-thread limiters.
  sluice::limiter_stats limiter_stats() const noexcept;
  /// Quota leases per policy, summed over the per-thread limiters, by the name the policy has
  /// in this config: its `policies:` name, or its RLS descriptor's stat key ("domain.key_value");
  /// names that lease alike are joined by ",". A policy of an earlier config (the limiter
  /// outlives reloads) is "(previous config)".
  std::vector<std::pair<std::string, sluice::lease_stats>> lease_stats_by_policy() const;
};

}  // namespace sluice::daemon
