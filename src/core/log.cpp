#include "core/log.hpp"

#include <atomic>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>

namespace sluice {
namespace {

struct log_state {
  std::atomic<int> min_level{static_cast<int>(log_level::warn)};
  std::mutex mu;  // guards sink
  std::shared_ptr<const log_sink> sink = std::make_shared<const log_sink>(&log_to_stderr);
};

// Never destroyed: I/O threads may log during static destruction.
log_state& state() {
  static auto* s = new log_state;
  return *s;
}

}  // namespace

std::string_view to_string(log_level l) noexcept {
  switch (l) {
    case log_level::trace:
      return "trace";
    case log_level::debug:
      return "debug";
    case log_level::info:
      return "info";
    case log_level::warn:
      return "warning";
    case log_level::error:
      return "error";
    case log_level::off:
      break;
  }
  return "off";
}

void set_log_sink(log_sink sink, log_level min_level) {
  auto next = sink ? std::make_shared<const log_sink>(std::move(sink)) : nullptr;
  auto& s = state();
  std::lock_guard lock(s.mu);
  s.sink = std::move(next);
  s.min_level.store(static_cast<int>(min_level), std::memory_order_relaxed);
}

void set_log_level(log_level min_level) noexcept {
  state().min_level.store(static_cast<int>(min_level), std::memory_order_relaxed);
}

void log_to_stderr(log_level level, std::string_view message) {
  std::string line = "sluice: ";
  line += to_string(level);
  line += ": ";
  line += message;
  line += '\n';
  // One write per line, so lines from several threads do not interleave.
  std::fwrite(line.data(), 1, line.size(), stderr);
}

namespace detail {

bool log_enabled(log_level level) noexcept {
  return level != log_level::off &&
         static_cast<int>(level) >= state().min_level.load(std::memory_order_relaxed);
}

void log(log_level level, std::string_view message) noexcept {
  if (!log_enabled(level)) return;
  std::shared_ptr<const log_sink> sink;
  {
    auto& s = state();
    std::lock_guard lock(s.mu);
    sink = s.sink;
  }
  if (!sink) return;
  try {
    (*sink)(level, message);
  } catch (...) {
  }
}

}  // namespace detail
}  // namespace sluice
