#pragma once
// Log lines that a client cannot forge or break. Request targets, header values and keys end
// up in log lines; a CR or LF in them would start a fake line, an ESC would drive the
// operator's terminal, and bytes that are not UTF-8 break log shippers that expect text.
// Every line sluiced writes (its own and the library's, through spdlog's default logger)
// passes through escaping_sink, so no call site has to remember.
#include <memory>
#include <string>
#include <string_view>

#include <spdlog/logger.h>
#include <spdlog/sinks/sink.h>

namespace sluice::daemon {

/// `s` with every byte that is not printable text escaped: C0 controls, DEL and bytes that
/// are not part of a well-formed UTF-8 sequence become `\xNN`; a backslash becomes `\\`, so
/// the escaping is unambiguous. Printable ASCII and valid UTF-8 (other than C1 controls,
/// U+0080..U+009F, which terminals also obey) pass unchanged.
std::string printable(std::string_view s);

/// True when printable(s) == s (the common case: nothing to copy).
bool is_printable(std::string_view s) noexcept;

/// A sink that escapes each message's text with printable() and hands it to `inner`.
/// Thread-safe when `inner` is (an `_mt` sink).
class escaping_sink final : public spdlog::sinks::sink {
 public:
  explicit escaping_sink(std::shared_ptr<spdlog::sinks::sink> inner);
  void log(const spdlog::details::log_msg& msg) override;
  void flush() override;
  void set_pattern(const std::string& pattern) override;
  void set_formatter(std::unique_ptr<spdlog::formatter> f) override;

 private:
  std::shared_ptr<spdlog::sinks::sink> inner_;
};

/// The daemon's logger: stderr (colours when it is a terminal), every line escaped.
std::shared_ptr<spdlog::logger> make_daemon_logger(const std::string& name);

/// Sets the daemon's log level (`trace` .. `off`) for its own lines and for the library's
/// messages, which go to spdlog's default logger too.
void set_daemon_log_level(spdlog::level::level_enum level);

}  // namespace sluice::daemon
