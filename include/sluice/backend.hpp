#pragma once
/// The interface every backend (memory, Redis) implements. Users normally hold a
/// sluice::limiter, which validates input and applies failure modes before and after it.
#include <cstdint>
#include <functional>
#include <string_view>
#include <system_error>

#include <sluice/decision.hpp>
#include <sluice/policy.hpp>

namespace sluice {

/// Completion of backend::async_decide: an error (backend trouble) or a decision.
using decide_handler = std::function<void(std::error_code, decision)>;

class backend {
 public:
  virtual ~backend() = default;

  /// Decides one request whose input is already validated. Blocks until decided or the
  /// backend's own timeout. Thread-safe. Must not be called from a thread that the
  /// backend's I/O runs on.
  virtual std::error_code decide(std::string_view key, const policy& p, std::uint64_t cost,
                                 decision& out) = 0;

  /// Decides asynchronously. `handler` is called exactly once, from a backend thread or
  /// inline (the limiter re-posts it, so user handlers never run inline). Thread-safe.
  virtual void async_decide(std::string_view key, const policy& p, std::uint64_t cost,
                            decide_handler handler) = 0;
};

}  // namespace sluice
