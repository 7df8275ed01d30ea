#include "traffic.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>

#include <sluice/http/duration.hpp>
#include <sluice/policy.hpp>

namespace sluice::cli {

namespace {

constexpr std::string_view shapes =
    "--traffic must be steady:RATE, burst:N@PERIOD, poisson:RATE or file:PATH (RATE in "
    "requests per second, PERIOD a duration such as 10s)";

std::string quoted(std::string_view s) { return "\"" + std::string(s) + "\""; }

// A positive, finite number of requests per second, at most max_traffic_rate.
std::optional<double> parse_rate(std::string_view s) {
  double v = 0;
  const auto* end = s.data() + s.size();
  const auto [ptr, ec] = std::from_chars(s.data(), end, v);
  if (s.empty() || ec != std::errc{} || ptr != end || !std::isfinite(v) || v <= 0 ||
      v > max_traffic_rate) {
    return std::nullopt;
  }
  return v;
}

std::optional<std::uint64_t> parse_count(std::string_view s) {
  std::uint64_t v = 0;
  const auto* end = s.data() + s.size();
  const auto [ptr, ec] = std::from_chars(s.data(), end, v);
  if (s.empty() || ec != std::errc{} || ptr != end) return std::nullopt;
  return v;
}

std::string_view trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(" \t\r");
  return s.substr(first, last - first + 1);
}

// A file: line's time: whole milliseconds with up to three decimals, in microseconds.
// std::nullopt when malformed; INT64_MAX when too large to be before any duration.
std::optional<std::int64_t> parse_file_time(std::string_view s) {
  const auto dot = s.find('.');
  const auto whole = s.substr(0, dot);
  const auto frac = dot == std::string_view::npos ? std::string_view{} : s.substr(dot + 1);
  const auto digits = [](std::string_view d) {
    return std::all_of(d.begin(), d.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  if (whole.empty() || !digits(whole) || !digits(frac)) return std::nullopt;
  if (dot != std::string_view::npos && (frac.empty() || frac.size() > 3)) return std::nullopt;
  // 366 days are 11 digits of ms; more is past any duration (and would overflow).
  if (whole.size() > 12) return INT64_MAX;
  std::int64_t us = static_cast<std::int64_t>(*parse_count(whole)) * 1000;
  std::int64_t scale = 100;
  for (const char c : frac) {
    us += (c - '0') * scale;
    scale /= 10;
  }
  return us;
}

}  // namespace

std::optional<traffic_spec> parse_traffic(std::string_view text, std::string& why) {
  traffic_spec t;
  t.text = std::string(text);
  const auto colon = text.find(':');
  const auto kind = text.substr(0, colon);
  const auto arg = colon == std::string_view::npos ? std::string_view{} : text.substr(colon + 1);
  const auto prefix = "--traffic " + t.text + ": ";
  auto fail = [&](std::string reason) {
    why = std::move(reason);
    return std::nullopt;
  };
  if (colon == std::string_view::npos) {
    return fail(std::string(shapes) + ", got " + quoted(text));
  }
  if (kind == "steady" || kind == "poisson") {
    t.kind = kind == "steady" ? traffic_spec::shape::steady : traffic_spec::shape::poisson;
    const auto rate = parse_rate(arg);
    if (!rate) {
      return fail(prefix +
                  "RATE must be a number of requests per second above 0 and at most 1000000 "
                  "(e.g. 20 or 0.5), got " +
                  quoted(arg));
    }
    t.rate = *rate;
    return t;
  }
  if (kind == "burst") {
    t.kind = traffic_spec::shape::burst;
    const auto at = arg.find('@');
    if (at == std::string_view::npos)
      return fail(prefix + "want burst:N@PERIOD (e.g. burst:10@1s)");
    const auto n = parse_count(arg.substr(0, at));
    if (!n || *n < 1 || *n > max_simulated_requests) {
      return fail(prefix + "N must be a whole number 1..10000000, got " +
                  quoted(arg.substr(0, at)));
    }
    std::string bad;
    const auto period = sluice::http::parse_duration(arg.substr(at + 1), &bad);
    if (!period) return fail(prefix + "PERIOD: " + bad);
    if (*period > sluice::max_window) return fail(prefix + "PERIOD must be at most 366d");
    t.burst = *n;
    t.period_us = std::chrono::duration_cast<std::chrono::microseconds>(*period).count();
    return t;
  }
  if (kind == "file") {
    t.kind = traffic_spec::shape::file;
    if (arg.empty()) return fail(prefix + "PATH is empty");
    t.path = std::string(arg);
    return t;
  }
  return fail(std::string(shapes) + ", got " + quoted(text));
}

std::optional<traffic_source> traffic_source::make(const traffic_spec& spec,
                                                   std::int64_t duration_us,
                                                   std::string_view duration_text,
                                                   std::uint64_t seed, std::string& why) {
  const auto prefix = "--traffic " + spec.text + ": ";
  // What the shape foresees, refused before any work when it is too much.
  double foreseen = 0;
  switch (spec.kind) {
    case traffic_spec::shape::steady:
    case traffic_spec::shape::poisson:
      foreseen = static_cast<double>(duration_us) / 1e6 * spec.rate;
      break;
    case traffic_spec::shape::burst:
      foreseen = std::ceil(static_cast<double>(duration_us) / static_cast<double>(spec.period_us)) *
                 static_cast<double>(spec.burst);
      break;
    case traffic_spec::shape::file:
      break;
  }
  if (foreseen > static_cast<double>(max_simulated_requests)) {
    why = prefix + "about " + std::to_string(static_cast<std::uint64_t>(foreseen)) +
          " requests in --duration " + std::string(duration_text) +
          ", more than a simulation takes (10000000)";
    return std::nullopt;
  }
  traffic_source src(spec, duration_us, seed);
  if (spec.kind != traffic_spec::shape::file) return src;

  std::ifstream in(spec.path);
  if (std::error_code is_dir; std::filesystem::is_directory(spec.path, is_dir)) {
    why = prefix + "cannot read " + spec.path + ": it is a directory";
    return std::nullopt;
  }
  if (!in) {
    why = prefix + "cannot read " + spec.path + ": " + std::strerror(errno);
    return std::nullopt;
  }
  std::string line;
  for (std::uint64_t n = 1; std::getline(in, line); ++n) {
    auto text = std::string_view(line);
    text = trim(text.substr(0, text.find('#')));
    if (text.empty()) continue;
    const auto at = "line " + std::to_string(n) + ": ";
    const auto t = parse_file_time(text);
    if (!t) {
      why = prefix + at + quoted(text) +
            " is not a time in milliseconds from 0 (a whole number, or up to three decimals: "
            "250, 12.5)";
      return std::nullopt;
    }
    if (*t >= duration_us) {
      why = prefix + at + std::string(text) + " ms is not before --duration " +
            std::string(duration_text);
      return std::nullopt;
    }
    if (src.times_.size() == max_simulated_requests) {
      why = prefix + at + "more requests than a simulation takes (10000000)";
      return std::nullopt;
    }
    src.times_.push_back(*t);
  }
  if (in.bad()) {
    why = prefix + "cannot read " + spec.path + ": " + std::strerror(errno);
    return std::nullopt;
  }
  std::sort(src.times_.begin(), src.times_.end());
  return src;
}

bool traffic_source::next(std::int64_t& t_us) {
  switch (spec_.kind) {
    case traffic_spec::shape::steady: {
      // floor(i / rate) < duration exactly when i / rate < duration: none lands on the end.
      const auto t = std::floor(static_cast<long double>(index_) * 1e6L / spec_.rate);
      if (t >= static_cast<long double>(duration_us_)) return false;
      t_us = static_cast<std::int64_t>(t);
      ++index_;
      return true;
    }
    case traffic_spec::shape::burst:
      if (index_ == spec_.burst) {
        index_ = 0;
        burst_at_us_ += spec_.period_us;
      }
      if (burst_at_us_ >= duration_us_) return false;
      t_us = burst_at_us_;
      ++index_;
      return true;
    case traffic_spec::shape::poisson: {
      // Exponential gaps from the generator's 53 high bits (the same on every platform, as
      // std::exponential_distribution is not).
      const double u = static_cast<double>(rng_() >> 11) * 0x1p-53;
      poisson_at_us_ += -std::log1p(-u) * 1e6 / spec_.rate;
      if (poisson_at_us_ >= static_cast<double>(duration_us_)) return false;
      t_us = static_cast<std::int64_t>(poisson_at_us_);
      return true;
    }
    case traffic_spec::shape::file:
      if (index_ == times_.size()) return false;
      t_us = times_[index_++];
      return true;
  }
  return false;
}

}  // namespace sluice::cli
