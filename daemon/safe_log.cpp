#include "safe_log.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <sluice/log.hpp>

namespace sluice::daemon {
namespace {

// The length of the well-formed UTF-8 sequence at s[i] that is printable (RFC 3629:
// no overlong forms, no surrogates, nothing above U+10FFFF; C1 controls excluded), or 0.
std::size_t printable_sequence(std::string_view s, std::size_t i) noexcept {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const auto cont = [&](std::size_t k) { return i + k < s.size() && (b(k) & 0xC0) == 0x80; };
  const unsigned char c = b(0);
  if (c >= 0x20 && c < 0x7F) return 1;
  if (c >= 0xC2 && c <= 0xDF) {
    if (!cont(1)) return 0;
    return (c == 0xC2 && b(1) < 0xA0) ? 0 : 2;  // U+0080..U+009F: C1 controls
  }
  if (c >= 0xE0 && c <= 0xEF) {
    if (!cont(1) || !cont(2)) return 0;
    if (c == 0xE0 && b(1) < 0xA0) return 0;   // overlong
    if (c == 0xED && b(1) >= 0xA0) return 0;  // UTF-16 surrogates
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (!cont(1) || !cont(2) || !cont(3)) return 0;
    if (c == 0xF0 && b(1) < 0x90) return 0;   // overlong
    if (c == 0xF4 && b(1) >= 0x90) return 0;  // above U+10FFFF
    return 4;
  }
  return 0;
}

}  // namespace

bool is_printable(std::string_view s) noexcept {
  for (std::size_t i = 0; i < s.size();) {
    const auto n = printable_sequence(s, i);
    if (n == 0 || s[i] == '\\') return false;
    i += n;
  }
  return true;
}

std::string printable(std::string_view s) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    if (s[i] == '\\') {
      out += "\\\\";
      ++i;
      continue;
    }
    if (const auto n = printable_sequence(s, i)) {
      out.append(s.data() + i, n);
      i += n;
      continue;
    }
    const auto c = static_cast<unsigned char>(s[i++]);
    out += "\\x";
    out += hex[c >> 4];
    out += hex[c & 0xF];
  }
  return out;
}

escaping_sink::escaping_sink(std::shared_ptr<spdlog::sinks::sink> inner)
    : inner_(std::move(inner)) {}

void escaping_sink::log(const spdlog::details::log_msg& msg) {
  const std::string_view text(msg.payload.data(), msg.payload.size());
  if (is_printable(text)) return inner_->log(msg);
  const auto escaped = printable(text);
  auto copy = msg;
  copy.payload = spdlog::string_view_t(escaped.data(), escaped.size());
  inner_->log(copy);
}

void escaping_sink::flush() { inner_->flush(); }

void escaping_sink::set_pattern(const std::string& pattern) { inner_->set_pattern(pattern); }

void escaping_sink::set_formatter(std::unique_ptr<spdlog::formatter> f) {
  inner_->set_formatter(std::move(f));
}

std::shared_ptr<spdlog::logger> make_daemon_logger(const std::string& name) {
  auto stderr_sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  auto sink = std::make_shared<escaping_sink>(std::move(stderr_sink));
  return std::make_shared<spdlog::logger>(name, std::move(sink));
}

void set_daemon_log_level(spdlog::level::level_enum level) {
  spdlog::set_level(level);
  auto library = log_level::off;
  switch (level) {
    case spdlog::level::trace:
      library = log_level::trace;
      break;
    case spdlog::level::debug:
      library = log_level::debug;
      break;
    case spdlog::level::info:
      library = log_level::info;
      break;
    case spdlog::level::warn:
      library = log_level::warn;
      break;
    case spdlog::level::err:
    case spdlog::level::critical:
      library = log_level::error;
      break;
    default:
      break;
  }
  set_log_sink(
      [](log_level l, std::string_view message) {
        constexpr spdlog::level::level_enum to_spdlog[] = {
            spdlog::level::trace, spdlog::level::debug, spdlog::level::info,
            spdlog::level::warn,  spdlog::level::err,   spdlog::level::off};
        spdlog::log(to_spdlog[static_cast<int>(l)], "{}", message);
      },
      library);
}

}  // namespace sluice::daemon
