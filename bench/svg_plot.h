// Plots as SVG text, for the reports kiln writes (`kiln tune-report`): a horizontal bar chart
// (one bar a label, a dashed line at a reference value) and a line chart (several series against
// a shared x axis). Self-contained SVG 1.1: any browser opens the files or shows them inline.
//
//   std::string svg = bar_chart_svg("speedup per region", {"region 1", ...}, {1.19, ...}, 1.0, "x");
#pragma once
#include <string>
#include <vector>

namespace kiln::bench {

std::string bar_chart_svg(const std::string& title, const std::vector<std::string>& labels,
                          const std::vector<double>& values, double reference, const std::string& unit);

struct Series {
  std::string name;
  std::vector<double> x, y;
};

std::string line_chart_svg(const std::string& title, const std::vector<Series>& series, const std::string& x_label,
                           const std::string& y_label);

// Text with &, <, > and " escaped for SVG and HTML.
std::string xml_escape(const std::string& text);

}  // namespace kiln::bench
