#pragma once
// The picture of `sluice simulate --svg`: allowed and denied requests as two rows of ticks
// over time, and the remaining budget after each request as a step line. Self-contained
// (no scripts, styles or references to anything outside the file), and small: requests are
// counted per pixel column, so a picture's size does not grow with the traffic.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::cli {

// `s` with &, <, >, " and ' escaped, for XML text and attribute values.
std::string xml_escape(std::string_view s);

class svg_chart {
 public:
  // A chart of [0, duration_us) for a policy whose decisions report `limit`.
  svg_chart(std::int64_t duration_us, std::uint64_t limit);

  // One decided request, in time order.
  void add(std::int64_t t_us, bool allowed, std::uint64_t remaining);

  // The SVG document; `title` is escaped here; the counts go into the legend.
  std::string render(std::string_view title, std::uint64_t allowed, std::uint64_t denied) const;

 private:
  struct column {
    std::uint64_t allowed = 0;
    std::uint64_t denied = 0;
    // The remaining budget after the column's first and last request, and its range.
    std::uint64_t first = 0, last = 0, low = 0, high = 0;
  };
  std::int64_t duration_us_;
  std::uint64_t limit_;
  std::vector<column> columns_;
};

}  // namespace sluice::cli
