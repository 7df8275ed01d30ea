#include <sluice/http/duration.hpp>

#include <cstdint>
#include <limits>
#include <string>

namespace sluice::http {
namespace {

struct unit {
  std::string_view name;
  std::int64_t ms;
};

constexpr unit units[] = {
    {"ms", 1}, {"s", 1000}, {"m", 60'000}, {"h", 3'600'000}, {"d", 86'400'000}};

std::optional<std::chrono::milliseconds> fail(std::string* why, std::string_view text,
                                              std::string_view reason) {
  if (why) {
    *why = "\"";
    *why += text;
    *why += "\" ";
    *why += reason;
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::chrono::milliseconds> parse_duration(std::string_view text, std::string* why) {
  constexpr std::string_view want =
      "is not a duration: want a whole number and a unit ms, s, m, h or d (e.g. 250ms, 1s, 1m, "
      "1h, 1d)";
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0) return fail(why, text, want);
  const auto suffix = text.substr(digits);
  const unit* u = nullptr;
  for (const auto& candidate : units) {
    if (suffix == candidate.name) u = &candidate;
  }
  if (!u) return fail(why, text, want);
  // value * unit must fit in an int64 of milliseconds.
  const std::int64_t max_value = std::numeric_limits<std::int64_t>::max() / u->ms;
  std::int64_t value = 0;
  for (std::size_t i = 0; i < digits; ++i) {
    const int digit = text[i] - '0';
    if (value > (max_value - digit) / 10)
      return fail(why, text, "is too long a duration (more than 2^63 - 1 ms)");
    value = value * 10 + digit;
  }
  if (value == 0) return fail(why, text, "is zero: a duration must be at least 1ms");
  return std::chrono::milliseconds{value * u->ms};
}

}  // namespace sluice::http
