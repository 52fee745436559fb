// `kiln tune-report DIR FILE.json...`: the reports of `kiln tune --json` as one HTML page with
// plots (issue 25): per model its default, tuned, adams2019 and mullapudi2016 times; per region
// the speedup as a bar chart and the search's best time against trials as a line chart, each an
// SVG file of its own in DIR, shown inline in DIR/index.html.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "bench/commands.h"
#include "bench/json.h"
#include "bench/svg_plot.h"
#include "dsl/error.h"

namespace kiln::bench {

namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  KILN_CHECK(in.good(), "kiln tune-report: cannot read ", path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string ms(const Json& v) {
  if (v.is_null()) return "-";
  char b[32];
  std::snprintf(b, sizeof b, "%.3f", v.number());
  return b;
}

std::string ratio(double a, double b) {
  if (!std::isfinite(a) || !std::isfinite(b) || b <= 0) return "-";
  char out[32];
  std::snprintf(out, sizeof out, "%.2fx", a / b);
  return out;
}

double number_or_nan(const Json& v) { return v.is_null() ? std::nan("") : v.number(); }

// "transformer_block-train": a file name for a report's plots.
std::string stem_of(const Json& r) { return r["model"].str() + (r["train"].boolean() ? "-train" : "") + "-" + r["device"].str(); }

}  // namespace

int run_tune_report(const std::string& out_dir, const std::vector<std::string>& files) {
  KILN_CHECK(!files.empty(), "kiln tune-report: name the JSON files of kiln tune --json");
  std::filesystem::create_directories(out_dir);
  std::vector<Json> reports;
  for (const std::string& f : files) {
    Json r = Json::parse(read_text(f), f);
    KILN_CHECK(r.has("suite") && r["suite"].str() == "tune", "kiln tune-report: ", f, " is not a kiln tune report");
    reports.push_back(std::move(r));
  }

  std::string html = "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>kiln tune report</title>\n"
                     "<style>body{font-family:sans-serif;margin:2em} table{border-collapse:collapse} "
                     "td,th{border:1px solid #bbb;padding:3px 8px;text-align:right} td.l,th.l{text-align:left} "
                     "pre{margin:0}</style></head><body>\n<h1>kiln tune</h1>\n";
  html += "<p>Each model compiled with kiln's default schedules and the built-in eager GEMM rule (default), with the "
          "tuning database's records and this machine's measured GEMM choice (tuned), a second time as the default "
          "(default again: how far identical builds land apart here, the noise floor), and with Halide's "
          "autoschedulers on every region (CPU only); medians of alternating rounds in one process.</p>\n";
  html += "<table><tr><th class=l>model</th><th class=l>machine</th><th>budget s</th><th>trials</th><th>default ms</th>"
          "<th>tuned ms</th><th>speedup</th><th>default again ms</th><th>adams2019 ms</th><th>mullapudi2016 ms</th></tr>\n";
  double log_sum = 0;
  for (const Json& r : reports) {
    double d = r["default_ms"].number(), t = r["tuned_ms"].number();
    log_sum += std::log(d / t);
    html += "<tr><td class=l><a href=\"#" + stem_of(r) + "\">" + xml_escape(r["model"].str()) +
            (r["train"].boolean() ? " training step" : " forward") + "</a></td><td class=l>" +
            xml_escape(r["machine"].str()) + "</td><td>" + ms(r["budget_s"]) + "</td><td>" +
            std::to_string(int(r["trials"].number())) + "</td><td>" + ms(r["default_ms"]) + "</td><td>" +
            ms(r["tuned_ms"]) + "</td><td>" + ratio(d, t) + "</td><td>" + ms(r["control_ms"]) + "</td><td>" +
            ms(r["adams2019_ms"]) + "</td><td>" +
            ms(r["mullapudi2016_ms"]) + "</td></tr>\n";
  }
  char geo[64];
  std::snprintf(geo, sizeof geo, "%.3fx", std::exp(log_sum / double(reports.size())));
  html += "</table>\n<p>Geometric mean speedup, tuned over default: <b>" + std::string(geo) + "</b></p>\n";

  for (const Json& r : reports) {
    std::string stem = stem_of(r);
    const Json& regions = r["regions"];
    std::vector<std::string> labels;
    std::vector<double> speedups;
    std::vector<Series> searches;
    for (size_t i = 0; i < regions.size(); ++i) {
      const Json& g = regions[i];
      labels.push_back(g["signature"].str() + " " + g["what"].str());
      speedups.push_back(g["default_ms"].number() / g["tuned_ms"].number());
      const Json& h = g["history"];
      if (h.size() < 2) continue;
      Series s{g["signature"].str(), {}, {}};
      for (size_t k = 0; k < h.size(); ++k) {
        s.x.push_back(h[k][0].number());
        s.y.push_back(h[k][2].number() / g["default_ms"].number());
      }
      searches.push_back(std::move(s));
    }
    std::string title = r["model"].str() + (r["train"].boolean() ? " training step" : " forward") + " on " + r["machine"].str();
    std::string bars = bar_chart_svg(title + ": speedup per region", labels, speedups, 1.0, "x");
    std::string lines = line_chart_svg(title + ": best time against trials", searches, "candidates timed",
                                       "best / kiln's default");
    std::ofstream(out_dir + "/" + stem + "-regions.svg") << bars;
    std::ofstream(out_dir + "/" + stem + "-trials.svg") << lines;
    html += "<h2 id=\"" + stem + "\">" + xml_escape(title) + "</h2>\n";
    html += "<p>default " + ms(r["default_ms"]) + " ms, tuned " + ms(r["tuned_ms"]) + " ms (" +
            ratio(r["default_ms"].number(), r["tuned_ms"].number()) + "), adams2019 " + ms(r["adams2019_ms"]) +
            " ms, mullapudi2016 " + ms(r["mullapudi2016_ms"]) + " ms</p>\n";
    if (r.has("gemm_choice") && !r["gemm_choice"].str().empty())
      html += "<p>Eager GEMM, this machine's measured choice (size, Halide and Eigen GFLOP/s):</p><pre>" +
              xml_escape(r["gemm_choice"].str()) + "</pre>\n";
    html += bars + lines;
    if (r.has("best_possible_ms"))
      html += "<p>Regions (each timed alone, times its calls): default " + ms(r["regions_default_ms"]) + " ms, tuned " +
              ms(r["regions_tuned_ms"]) + " ms, their bounds " + ms(r["regions_bound_ms"]) +
              " ms. With every region at its bound and the rest of the call as it is, the call would take " +
              ms(r["best_possible_ms"]) + " ms (" + ratio(r["default_ms"].number(), r["best_possible_ms"].number()) +
              " the default): no region schedule can do more.</p>\n";
    html += "<table><tr><th class=l>region</th><th>calls</th><th>default ms</th><th>tuned ms</th><th>speedup</th>"
            "<th>MB moved</th><th>bound ms</th><th>default at bound</th>"
            "<th>trials</th><th>rejected</th><th>noise</th><th class=l>schedule</th></tr>\n";
    for (size_t i = 0; i < regions.size(); ++i) {
      const Json& g = regions[i];
      char noise[32];
      std::snprintf(noise, sizeof noise, "%.1f%%", 100 * g["noise"].number());
      html += "<tr><td class=l>" + xml_escape(g["signature"].str() + " " + g["what"].str()) + "</td><td>" +
              std::to_string(int(g["calls"].number())) + "</td><td>" + ms(g["default_ms"]) + "</td><td>" +
              ms(g["tuned_ms"]) + "</td><td>" + ratio(g["default_ms"].number(), g["tuned_ms"].number()) +
              "</td><td>" + (g.has("bytes") ? ms(Json(g["bytes"].number() / 1e6)) : "-") + "</td><td>" +
              (g.has("bound_ms") ? ms(g["bound_ms"]) + " " + g["bound"].str() : "-") + "</td><td>" +
              (g.has("bound_ms") ? ratio(g["bound_ms"].number(), g["default_ms"].number()) : "-") +
              "</td><td>" + std::to_string(int(g["trials"].number())) + "</td><td>" +
              std::to_string(int(g["rejected"].number())) + "</td><td>" + noise + "</td><td class=l><pre>" +
              xml_escape(g["schedule"].str().empty() ? "(kiln's)" : g["schedule"].str()) + "</pre></td></tr>\n";
    }
    html += "</table>\n";
  }
  html += "</body></html>\n";
  std::string index = out_dir + "/index.html";
  write_file_atomic(index, html);
  std::printf("kiln tune-report: %zu report%s, tuned over default %s in geometric mean; wrote %s\n", reports.size(),
              reports.size() == 1 ? "" : "s", geo, index.c_str());
  return 0;
}

}  // namespace kiln::bench
