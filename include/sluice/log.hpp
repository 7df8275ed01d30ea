#pragma once
/// Where the library's own messages go. A library must not write to its user's stdout (it
/// may be data) nor decide how chatty it is: the user does. By default, warnings and errors
/// go to stderr as `sluice: warning: ...` lines and nothing else is written anywhere.
///
///   sluice::set_log_sink([](sluice::log_level l, std::string_view m) { my_log(l, m); },
///                        sluice::log_level::info);
///
/// The messages are about the backend (Redis connected, lost, failed over; a burst of
/// failed decisions and its end), never one per decision.
#include <functional>
#include <string_view>

namespace sluice {

enum class log_level { trace, debug, info, warn, error, off };

/// `trace`, `debug`, `info`, `warn`, `error`, `off`.
std::string_view to_string(log_level l) noexcept;

/// Receives one message (without a trailing newline). Called from any thread, the backend's
/// I/O thread among them: it must be thread-safe and should not block.
using log_sink = std::function<void(log_level level, std::string_view message)>;

/// Sends the library's messages at `min_level` and above to `sink` (an empty sink drops
/// them all). Affects every limiter in the process. Thread-safe; a message being written
/// while the sink is replaced goes to the old or the new one.
void set_log_sink(log_sink sink, log_level min_level = log_level::warn);

/// Changes only the threshold.
void set_log_level(log_level min_level) noexcept;

/// The default sink: `sluice: <level>: <message>` on stderr.
void log_to_stderr(log_level level, std::string_view message);

}  // namespace sluice
