// sluice_bench_plot: draws throughput and p99 latency against concurrency as one SVG file,
// from the table scripts/bench writes (no plotting package needed).
//
//   sluice_bench_plot IN.tsv OUT.svg "title"
//
// IN.tsv: one point per line, tab-separated: series, concurrency, throughput (per second),
// p99 (microseconds). Lines starting with '#' are skipped. Both x axes are logarithmic, the
// throughput axis linear from 0, the latency axis logarithmic.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct point {
  double x, throughput, p99_us;
};

const char* const colours[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                               "#8c564b", "#e377c2", "#7f7f7f", "#17becf", "#bcbd22"};

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<') {
      out += "&lt;";
    } else if (c == '>') {
      out += "&gt;";
    } else if (c == '&') {
      out += "&amp;";
    } else {
      out += c;
    }
  }
  return out;
}

std::string num(double v) {
  char buf[32];
  if (v >= 1e6) {
    std::snprintf(buf, sizeof buf, "%gM", v / 1e6);
  } else if (v >= 1e3) {
    std::snprintf(buf, sizeof buf, "%gk", v / 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%g", v);
  }
  return buf;
}

// One panel: a frame at (x0, y0) of size w x h with log-x and linear or log y.
struct panel {
  double x0, y0, w, h;
  double xmin, xmax, ymin, ymax;
  bool log_y;

  double px(double x) const {
    return x0 + w * (std::log10(x) - std::log10(xmin)) / (std::log10(xmax) - std::log10(xmin));
  }
  double py(double y) const {
    const double f =
        log_y ? (std::log10(y) - std::log10(ymin)) / (std::log10(ymax) - std::log10(ymin))
              : (y - ymin) / (ymax - ymin);
    return y0 + h - h * f;
  }
};

void axes(std::ostream& o, const panel& p, const std::string& title, const std::string& ylabel) {
  o << "<rect x='" << p.x0 << "' y='" << p.y0 << "' width='" << p.w << "' height='" << p.h
    << "' fill='none' stroke='#333'/>\n";
  o << "<text x='" << p.x0 + p.w / 2 << "' y='" << p.y0 - 10
    << "' text-anchor='middle' font-weight='bold'>" << escape(title) << "</text>\n";
  o << "<text x='" << p.x0 + p.w / 2 << "' y='" << p.y0 + p.h + 36
    << "' text-anchor='middle'>concurrent callers / connections</text>\n";
  o << "<text transform='translate(" << p.x0 - 52 << ',' << p.y0 + p.h / 2
    << ") rotate(-90)' text-anchor='middle'>" << escape(ylabel) << "</text>\n";
  for (double x = 1; x <= p.xmax * 1.0001; x *= 10) {
    if (x < p.xmin * 0.9999) continue;
    o << "<line x1='" << p.px(x) << "' y1='" << p.y0 << "' x2='" << p.px(x) << "' y2='"
      << p.y0 + p.h << "' stroke='#ddd'/>\n";
    o << "<text x='" << p.px(x) << "' y='" << p.y0 + p.h + 16 << "' text-anchor='middle'>" << num(x)
      << "</text>\n";
  }
  std::vector<double> ticks;
  if (p.log_y) {
    for (double y = std::pow(10, std::floor(std::log10(p.ymin))); y <= p.ymax * 1.0001; y *= 10) {
      if (y >= p.ymin * 0.9999) ticks.push_back(y);
    }
  } else {
    const double step = std::pow(10, std::floor(std::log10(p.ymax / 2)));
    const double s = p.ymax / step > 10 ? step * 2 : step;
    for (double y = 0; y <= p.ymax * 1.0001; y += s) ticks.push_back(y);
  }
  for (double y : ticks) {
    o << "<line x1='" << p.x0 << "' y1='" << p.py(y) << "' x2='" << p.x0 + p.w << "' y2='"
      << p.py(y) << "' stroke='#ddd'/>\n";
    o << "<text x='" << p.x0 - 6 << "' y='" << p.py(y) + 4 << "' text-anchor='end'>" << num(y)
      << "</text>\n";
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: sluice_bench_plot IN.tsv OUT.svg TITLE\n");
    return 2;
  }
  std::ifstream in(argv[1]);
  if (!in) {
    std::fprintf(stderr, "sluice_bench_plot: cannot read %s\n", argv[1]);
    return 1;
  }
  std::vector<std::string> order;
  std::map<std::string, std::vector<point>> series;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    std::string name, x, t, l;
    if (!std::getline(ls, name, '\t') || !std::getline(ls, x, '\t') || !std::getline(ls, t, '\t') ||
        !std::getline(ls, l, '\t')) {
      continue;
    }
    const point pt{std::stod(x), std::stod(t), std::stod(l)};
    if (pt.x <= 0 || pt.throughput < 0 || pt.p99_us <= 0) continue;
    if (!series.count(name)) order.push_back(name);
    series[name].push_back(pt);
  }
  if (series.empty()) {
    std::fprintf(stderr, "sluice_bench_plot: no points in %s\n", argv[1]);
    return 1;
  }
  double xmax = 1, tmax = 1, lmin = 1e18, lmax = 1;
  for (auto& [name, pts] : series) {
    std::sort(pts.begin(), pts.end(), [](const point& a, const point& b) { return a.x < b.x; });
    for (const auto& p : pts) {
      xmax = std::max(xmax, p.x);
      tmax = std::max(tmax, p.throughput);
      lmin = std::min(lmin, p.p99_us);
      lmax = std::max(lmax, p.p99_us);
    }
  }
  const double W = 1000, H = 420 + 18.0 * static_cast<double>(order.size());
  const panel left{80, 50, 370, 300, 1, xmax * 1.5, 0, tmax * 1.1, false};
  const panel right{580,
                    50,
                    370,
                    300,
                    1,
                    xmax * 1.5,
                    std::pow(10, std::floor(std::log10(lmin))),
                    std::pow(10, std::ceil(std::log10(lmax * 1.01))),
                    true};

  std::ofstream o(argv[2]);
  o << "<svg xmlns='http://www.w3.org/2000/svg' width='" << W << "' height='" << H
    << "' font-family='sans-serif' font-size='12'>\n";
  o << "<rect width='100%' height='100%' fill='white'/>\n";
  o << "<text x='" << W / 2 << "' y='20' text-anchor='middle' font-size='15'>" << escape(argv[3])
    << "</text>\n";
  axes(o, left, "Throughput", "per second");
  axes(o, right, "p99 latency", "microseconds");
  for (std::size_t i = 0; i < order.size(); ++i) {
    const auto& pts = series[order[i]];
    const char* c = colours[i % (sizeof colours / sizeof *colours)];
    for (const panel* p : {&left, &right}) {
      std::string path;
      for (const auto& pt : pts) {
        const double y = p == &left ? pt.throughput : pt.p99_us;
        path += (path.empty() ? "M" : " L") + std::to_string(p->px(pt.x)) + ',' +
                std::to_string(p->py(y));
        o << "<circle cx='" << p->px(pt.x) << "' cy='" << p->py(y) << "' r='3.5' fill='" << c
          << "'/>\n";
      }
      o << "<path d='" << path << "' fill='none' stroke='" << c << "' stroke-width='2'/>\n";
    }
    const double ly = 410 + 18.0 * static_cast<double>(i);
    o << "<rect x='80' y='" << ly - 10 << "' width='14' height='10' fill='" << c << "'/>\n";
    o << "<text x='100' y='" << ly << "'>" << escape(order[i]) << "</text>\n";
  }
  o << "</svg>\n";
  return o ? 0 : 1;
}
