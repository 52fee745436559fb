#include "bench/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace kiln::bench {

namespace {

std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", v);
  return b;
}

std::string text(double x, double y, const std::string& s, const char* anchor = "start", int size = 12) {
  return "<text x=\"" + num(x) + "\" y=\"" + num(y) + "\" font-size=\"" + std::to_string(size) +
         "\" font-family=\"sans-serif\" text-anchor=\"" + anchor + "\">" + xml_escape(s) + "</text>\n";
}

const char* kColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                         "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

}  // namespace

std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '&') out += "&amp;";
    else if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '"') out += "&quot;";
    else out += c;
  }
  return out;
}

std::string bar_chart_svg(const std::string& title, const std::vector<std::string>& labels,
                          const std::vector<double>& values, double reference, const std::string& unit) {
  const double label_w = 360, plot_w = 360, bar_h = 18, top = 40;
  double height = top + bar_h * double(values.size()) + 30;
  double hi = reference;
  for (double v : values) hi = std::max(hi, std::isfinite(v) ? v : 0.0);
  hi *= 1.1;
  auto x_of = [&](double v) { return label_w + plot_w * v / hi; };
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(label_w + plot_w + 70) + "\" height=\"" +
                    num(height) + "\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg += text(10, 22, title, "start", 15);
  for (size_t i = 0; i < values.size(); ++i) {
    double y = top + bar_h * double(i);
    double v = std::isfinite(values[i]) ? values[i] : 0;
    svg += text(label_w - 6, y + 13, labels[i].size() > 56 ? labels[i].substr(0, 55) + "..." : labels[i], "end", 11);
    svg += "<rect x=\"" + num(label_w) + "\" y=\"" + num(y + 2) + "\" width=\"" + num(x_of(v) - label_w) +
           "\" height=\"" + num(bar_h - 4) + "\" fill=\"" + (v > reference ? "#2ca02c" : "#7f7f7f") + "\"/>\n";
    char b[32];
    std::snprintf(b, sizeof b, "%.2f%s", v, unit.c_str());
    svg += text(x_of(v) + 4, y + 13, b, "start", 11);
  }
  double rx = x_of(reference);
  svg += "<line x1=\"" + num(rx) + "\" y1=\"" + num(top - 4) + "\" x2=\"" + num(rx) + "\" y2=\"" + num(height - 26) +
         "\" stroke=\"black\" stroke-dasharray=\"4 3\"/>\n";
  char b[32];
  std::snprintf(b, sizeof b, "%.2f%s", reference, unit.c_str());
  svg += text(rx, height - 10, b, "middle", 11);
  return svg + "</svg>\n";
}

std::string line_chart_svg(const std::string& title, const std::vector<Series>& series, const std::string& x_label,
                           const std::string& y_label) {
  const double left = 60, top = 40, w = 520, h = 280, legend_w = 300;
  double x_lo = 0, x_hi = 1, y_lo = 0, y_hi = 0;
  bool any = false;
  for (const Series& s : series)
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!std::isfinite(s.y[i])) continue;
      x_hi = std::max(x_hi, s.x[i]);
      y_lo = any ? std::min(y_lo, s.y[i]) : s.y[i];
      y_hi = any ? std::max(y_hi, s.y[i]) : s.y[i];
      any = true;
    }
  if (!any || y_hi <= y_lo) y_lo = any ? y_lo - 0.5 : 0, y_hi = y_lo + 1;
  double pad = 0.05 * (y_hi - y_lo);
  y_lo -= pad, y_hi += pad;
  auto px = [&](double x) { return left + w * (x - x_lo) / (x_hi - x_lo); };
  auto py = [&](double y) { return top + h - h * (y - y_lo) / (y_hi - y_lo); };
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(left + w + legend_w) + "\" height=\"" +
                    num(top + h + 50) + "\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg += text(10, 22, title, "start", 15);
  svg += "<rect x=\"" + num(left) + "\" y=\"" + num(top) + "\" width=\"" + num(w) + "\" height=\"" + num(h) +
         "\" fill=\"none\" stroke=\"black\"/>\n";
  for (int k = 0; k <= 4; ++k) {
    double y = y_lo + (y_hi - y_lo) * k / 4, x = x_lo + (x_hi - x_lo) * k / 4;
    char b[32];
    std::snprintf(b, sizeof b, "%.3g", y);
    svg += text(left - 4, py(y) + 4, b, "end", 10);
    std::snprintf(b, sizeof b, "%.0f", x);
    svg += text(px(x), top + h + 14, b, "middle", 10);
  }
  svg += text(left + w / 2, top + h + 34, x_label, "middle", 12);
  svg += "<text x=\"14\" y=\"" + num(top + h / 2) + "\" font-size=\"12\" font-family=\"sans-serif\" text-anchor=\"middle\" "
         "transform=\"rotate(-90 14 " + num(top + h / 2) + ")\">" + xml_escape(y_label) + "</text>\n";
  for (size_t k = 0; k < series.size(); ++k) {
    const Series& s = series[k];
    const char* color = kColors[k % 10];
    std::string points;
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i)
      if (std::isfinite(s.y[i])) points += num(px(s.x[i])) + "," + num(py(s.y[i])) + " ";
    svg += "<polyline fill=\"none\" stroke=\"" + std::string(color) + "\" stroke-width=\"1.5\" points=\"" + points + "\"/>\n";
    double ly = top + 12 + 14 * double(k);
    if (ly > top + h) continue;  // more series than the legend's room: their lines still show
    svg += "<rect x=\"" + num(left + w + 10) + "\" y=\"" + num(ly - 8) + "\" width=\"10\" height=\"10\" fill=\"" + color + "\"/>\n";
    svg += text(left + w + 24, ly + 1, s.name.size() > 44 ? s.name.substr(0, 43) + "..." : s.name, "start", 10);
  }
  return svg + "</svg>\n";
}

}  // namespace kiln::bench
