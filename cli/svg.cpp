#include "svg.hpp"

#include <algorithm>
#include <cstdio>

namespace sluice::cli {

namespace {

// The layout, in pixels.
constexpr int width = 960;
constexpr int height = 380;
constexpr int left = 70;      // the plots' x = 0
constexpr int columns = 880;  // one column a pixel
constexpr int right = left + columns;
constexpr int remaining_top = 70;  // the remaining budget: limit at the top, 0 at the bottom
constexpr int remaining_bottom = 260;
constexpr int row_height = 20;
constexpr int allowed_bottom = 292;  // the tick rows: a row's ticks stand on its bottom
constexpr int denied_bottom = 318;
constexpr int axis_y = 326;  // the time axis

const char* const green = "#1a9641";
const char* const red = "#d7191c";
const char* const blue = "#2c7bb6";
const char* const grid = "#e3e3e3";

// A coordinate with at most one decimal.
std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  std::string s = buf;
  if (s.size() > 2 && s.compare(s.size() - 2, 2, ".0") == 0) s.resize(s.size() - 2);
  if (s == "-0") s = "0";
  return s;
}

// `ms` as seconds: whole, or with up to three decimals.
std::string seconds(std::int64_t ms) {
  std::string s = std::to_string(ms / 1000);
  if (const auto rest = ms % 1000; rest != 0) {
    auto frac = std::to_string(1000 + rest).substr(1);
    while (frac.back() == '0') frac.pop_back();
    s += "." + frac;
  }
  return s;
}

// The time axis' step: 1, 2 or 5 x 10^k ms, the smallest with at most ten steps.
std::int64_t time_step_ms(std::int64_t duration_ms) {
  for (std::int64_t scale = 1;; scale *= 10) {
    for (const std::int64_t m : {1, 2, 5}) {
      if (duration_ms / (m * scale) <= 10) return m * scale;
    }
  }
}

std::string text(double x, double y, std::string_view anchor, std::string_view body,
                 std::string_view extra = {}) {
  return "<text x=\"" + num(x) + "\" y=\"" + num(y) + "\" text-anchor=\"" + std::string(anchor) +
         "\"" + std::string(extra) + ">" + xml_escape(body) + "</text>\n";
}

std::string line(double x1, double y1, double x2, double y2, std::string_view stroke) {
  return "<line x1=\"" + num(x1) + "\" y1=\"" + num(y1) + "\" x2=\"" + num(x2) + "\" y2=\"" +
         num(y2) + "\" stroke=\"" + std::string(stroke) + "\"/>\n";
}

}  // namespace

std::string xml_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        // Control characters are not allowed in XML 1.0 at all (but tab and newlines).
        if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' && c != '\r') {
          out += '?';
        } else {
          out += c;
        }
    }
  }
  return out;
}

svg_chart::svg_chart(std::int64_t duration_us, std::uint64_t limit)
    : duration_us_(std::max<std::int64_t>(duration_us, 1)),
      limit_(std::max<std::uint64_t>(limit, 1)),
      columns_(columns) {}

void svg_chart::add(std::int64_t t_us, bool allowed, std::uint64_t remaining) {
  // t_us < duration_us <= 366 days: the product stays far below 2^63.
  const auto c = std::clamp<std::int64_t>(t_us * columns / duration_us_, 0, columns - 1);
  auto& col = columns_[static_cast<std::size_t>(c)];
  const auto r = std::min(remaining, limit_);
  if (col.allowed + col.denied == 0) {
    col.first = col.low = col.high = r;
  } else {
    col.low = std::min(col.low, r);
    col.high = std::max(col.high, r);
  }
  col.last = r;
  ++(allowed ? col.allowed : col.denied);
}

std::string svg_chart::render(std::string_view title, std::uint64_t allowed,
                              std::uint64_t denied) const {
  const auto y_of = [&](std::uint64_t remaining) {
    return remaining_bottom - static_cast<double>(remaining) * (remaining_bottom - remaining_top) /
                                  static_cast<double>(limit_);
  };
  std::string s;
  s += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(width) +
       "\" height=\"" + std::to_string(height) + "\" viewBox=\"0 0 " + std::to_string(width) + " " +
       std::to_string(height) + "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  s += "<title>" + xml_escape(title) + "</title>\n";
  s += "<rect width=\"" + std::to_string(width) + "\" height=\"" + std::to_string(height) +
       "\" fill=\"#ffffff\"/>\n";
  s += text(width / 2.0, 26, "middle", title, " font-size=\"15\" font-weight=\"bold\"");

  // Legend.
  s += "<rect x=\"" + std::to_string(left) + "\" y=\"41\" width=\"10\" height=\"10\" fill=\"" +
       green + "\"/>\n";
  s += text(left + 15, 50, "start", "allowed (" + std::to_string(allowed) + ")");
  s += "<rect x=\"" + std::to_string(left + 170) +
       "\" y=\"41\" width=\"10\" height=\"10\" fill=\"" + red + "\"/>\n";
  s += text(left + 185, 50, "start", "denied (" + std::to_string(denied) + ")");
  s += "<line x1=\"" + std::to_string(left + 340) + "\" y1=\"46\" x2=\"" +
       std::to_string(left + 360) + "\" y2=\"46\" stroke=\"" + blue + "\" stroke-width=\"2\"/>\n";
  s += text(left + 365, 50, "start", "remaining after each request");

  // Grid and axes.
  const auto duration_ms = std::max<std::int64_t>(duration_us_ / 1000, 1);
  const auto step = time_step_ms(duration_ms);
  for (std::int64_t t = 0; t <= duration_ms; t += step) {
    const double x = left + static_cast<double>(t) * columns / static_cast<double>(duration_ms);
    s += line(x, remaining_top, x, denied_bottom, grid);
    s += line(x, axis_y, x, axis_y + 5, "#000000");
    s += text(x, axis_y + 18, "middle", seconds(t));
  }
  std::vector<std::uint64_t> levels{0, limit_};
  if (limit_ >= 4 && limit_ % 2 == 0) levels.insert(levels.begin() + 1, limit_ / 2);
  for (const auto v : levels) {
    s += line(left, y_of(v), right, y_of(v), grid);
    s += text(left - 6, y_of(v) + 4, "end", std::to_string(v));
  }
  s += line(left, remaining_top, left, remaining_bottom, "#000000");
  s += line(left, axis_y, right, axis_y, "#000000");
  s += text(left + columns / 2.0, axis_y + 40, "middle", "time (s)");
  s += text(22, (remaining_top + remaining_bottom) / 2.0, "middle", "remaining",
            " transform=\"rotate(-90 22 " + num((remaining_top + remaining_bottom) / 2.0) + ")\"");
  s += text(left - 6, allowed_bottom - 6, "end", "allowed");
  s += text(left - 6, denied_bottom - 6, "end", "denied");

  // The tick rows: one tick per column with requests, its height the column's count
  // against the busiest column's (at least a few pixels, so that one request shows).
  std::uint64_t busiest = 1;
  for (const auto& c : columns_) busiest = std::max({busiest, c.allowed, c.denied});
  const auto ticks = [&](auto count, int bottom, const char* colour) {
    std::string d;
    for (int i = 0; i < columns; ++i) {
      const std::uint64_t n = count(columns_[static_cast<std::size_t>(i)]);
      if (n == 0) continue;
      const double h = 4 + (row_height - 4) * static_cast<double>(n) / static_cast<double>(busiest);
      d += "M" + num(left + i + 0.5) + " " + std::to_string(bottom) + "v-" + num(h);
    }
    if (d.empty()) return std::string{};
    return "<path d=\"" + d + "\" stroke=\"" + colour + "\" fill=\"none\"/>\n";
  };
  s += ticks([](const column& c) { return c.allowed; }, allowed_bottom, green);
  s += ticks([](const column& c) { return c.denied; }, denied_bottom, red);

  // The remaining budget: full before the first request, then what each decision reported.
  std::string d = "M" + std::to_string(left) + " " + num(y_of(limit_));
  for (int i = 0; i < columns; ++i) {
    const auto& c = columns_[static_cast<std::size_t>(i)];
    if (c.allowed + c.denied == 0) continue;
    d += "H" + num(left + i + 0.5) + "V" + num(y_of(c.first));
    if (c.low != c.high) {
      d += "V" + num(y_of(c.low)) + "V" + num(y_of(c.high)) + "V" + num(y_of(c.last));
    }
  }
  d += "H" + std::to_string(right);
  s += "<path d=\"" + d + "\" stroke=\"" + blue +
       "\" stroke-width=\"1.5\" fill=\"none\" stroke-linejoin=\"round\"/>\n";
  s += "</svg>\n";
  return s;
}

}  // namespace sluice::cli
