#pragma once
/// Durations as configs and command lines write them: `250ms`, `1s`, `1m`, `1h`, `1d`
/// (a window's length in sluiced's YAML, `sluice check --window`, or your own config).
#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace sluice::http {

/// Parses a positive whole number followed by one unit: `ms`, `s`, `m` (minutes), `h` or
/// `d` (days of 24 h), e.g. `250ms`, `90s`, `1m`, `1h`, `7d`. Nothing else is a duration:
/// no sign, spaces, fraction, other unit or case (`1S`, `1.5s`, `1m30s`, `1 s`), no bare
/// number, not zero, and nothing past what std::chrono::milliseconds holds. On failure
/// returns std::nullopt and, when `why` is given, a one-line reason such as
/// `"1.5s" is not a duration: want a whole number and a unit ms, s, m, h or d (e.g. 250ms,
/// 1s, 1m, 1h, 1d)`. A window's own range (1 ms..366 days) is validate()'s to check.
std::optional<std::chrono::milliseconds> parse_duration(std::string_view text,
                                                        std::string* why = nullptr);

}  // namespace sluice::http
