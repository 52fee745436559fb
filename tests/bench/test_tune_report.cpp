// kiln tune-report (bench/tune_report.cpp): kiln tune's JSON read back (bench/json.h's parser),
// its numbers in the HTML table with the geometric mean, one bar per region and one line per
// searched region in the SVG plots; a report that is not JSON is an error naming the file.
#include <filesystem>
#include <fstream>
#include <sstream>

#include "bench/commands.h"
#include "bench/json.h"
#include "support/reference.h"

using namespace kiln;
using namespace kiln::bench;
using namespace kiln::test;

namespace {

std::string read(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// A report as kiln tune writes it: three regions, two of them searched.
Json tune_report(const std::string& model, double default_ms, double tuned_ms) {
  Json regions = Json::array();
  for (int i = 0; i < 3; ++i) {
    Json h = Json::array();
    if (i < 2)
      for (int k = 1; k <= 4; ++k) h.push(Json::array().push(k).push(1.0 - 0.1 * k).push(1.0 - 0.05 * k));
    regions.push(Json::object()
                     .set("signature", "000000000000000" + std::to_string(i))
                     .set("what", "a pipeline of <2> ops & more")
                     .set("calls", 1)
                     .set("default_ms", 1.0)
                     .set("tuned_ms", i == 0 ? 0.8 : 1.0)
                     .set("trials", int(h.size()))
                     .set("rejected", 0)
                     .set("noise", 0.01)
                     .set("schedule", i == 0 ? "cpu.vector.scale 2\n" : "")
                     .set("history", h));
  }
  return Json::object()
      .set("suite", "tune")
      .set("model", model)
      .set("train", true)
      .set("device", "cpu")
      .set("machine", "a test CPU (2 threads)")
      .set("budget_s", 60.0)
      .set("trials", 8)
      .set("default_ms", default_ms)
      .set("tuned_ms", tuned_ms)
      .set("control_ms", default_ms * 1.01)
      .set("adams2019_ms", 50.0)
      .set("mullapudi2016_ms", Json())
      .set("gemm_choice", "gemm 256 halide 185.0 eigen 207.5\n")
      .set("regions", regions);
}

}  // namespace

BOOST_AUTO_TEST_CASE(json_reads_back_what_it_writes) {
  Json j = tune_report("m", 10, 8);
  Json back = Json::parse(j.dump(), "r.json");
  BOOST_TEST(back.dump() == j.dump());
  BOOST_TEST(back["regions"][1]["what"].str() == "a pipeline of <2> ops & more");
  BOOST_TEST(back["regions"][0]["history"][3][2].number() == 0.8);
  BOOST_TEST(back["mullapudi2016_ms"].is_null());
  BOOST_TEST(Json::parse("{\"s\": \"a\\\"b\\\\c\\u00e9\\n\"}", "s")["s"].str() == "a\"b\\c\xc3\xa9\n");
  check_error([] { Json::parse("{\"a\": [1, 2}", "bad.json"); }, {"bad.json", "expected ']'", "at byte 11"});
  check_error([] { Json::parse("{\"a\": 1} x", "tail.json"); }, {"tail.json", "text after the value"});
}

BOOST_AUTO_TEST_CASE(the_report_shows_every_model_and_region) {
  TempDir dir("kiln-test-tune-report");
  std::string a = dir.file("a.json"), b = dir.file("b.json");
  std::ofstream(a) << tune_report("model_a", 12.0, 10.0).dump();
  std::ofstream(b) << tune_report("model_b", 10.0, 10.0).dump();
  run_tune_report((dir.path / "out").string(), {a, b});
  std::string html = read(dir.path / "out" / "index.html");
  BOOST_TEST(html.find("model_a training step") != std::string::npos);
  BOOST_TEST(html.find("<td>12.000</td><td>10.000</td><td>1.20x</td><td>12.120</td><td>50.000</td><td>-</td>") != std::string::npos, html);
  BOOST_TEST(html.find("<b>1.095x</b>") != std::string::npos);  // sqrt(1.2 * 1.0)
  BOOST_TEST(html.find("a pipeline of &lt;2&gt; ops &amp; more") != std::string::npos);
  BOOST_TEST(html.find("<svg") != std::string::npos);
  std::string bars = read(dir.path / "out" / "model_a-train-cpu-regions.svg");
  BOOST_TEST(count(bars, "fill=\"#2ca02c\"") == 1u);  // region 0 faster than kiln's
  BOOST_TEST(count(bars, "fill=\"#7f7f7f\"") == 2u);
  BOOST_TEST(bars.find("1.25x") != std::string::npos);
  std::string lines = read(dir.path / "out" / "model_a-train-cpu-trials.svg");
  BOOST_TEST(count(lines, "<polyline") == 2u);  // the two searched regions
  std::ofstream(dir.file("c.json")) << "{\"suite\": \"tune\"";
  check_error([&] { run_tune_report((dir.path / "out").string(), {dir.file("c.json")}); }, {"c.json", "expected '}'"});
}
