#include "dsl/eager/gemm_choice.h"

#include <cmath>
#include <cstdio>
#include <mutex>
#include <sstream>

#include "dsl/error.h"

namespace kiln {

bool GemmChoice::eigen_for(int64_t macs) const {
  const GemmPoint* best = nullptr;
  double best_distance = 0;
  for (const GemmPoint& p : points) {
    double distance = std::abs(std::log(double(macs)) - 3 * std::log(double(p.size)));
    if (!best || distance < best_distance) best = &p, best_distance = distance;
  }
  return best && best->eigen_gflops > best->halide_gflops;
}

std::string GemmChoice::text() const {
  std::string out;
  for (const GemmPoint& p : points) {
    char line[128];
    std::snprintf(line, sizeof line, "gemm %lld halide %.1f eigen %.1f\n", static_cast<long long>(p.size),
                  p.halide_gflops, p.eigen_gflops);
    out += line;
  }
  return out;
}

GemmChoice GemmChoice::parse(const std::string& text, const std::string& where) {
  GemmChoice c;
  std::istringstream in(text);
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream words(line);
    std::string first;
    if (!(words >> first)) continue;
    GemmPoint p;
    std::string halide, eigen, extra;
    KILN_CHECK(first == "gemm" && words >> p.size >> halide >> p.halide_gflops >> eigen >> p.eigen_gflops &&
                   halide == "halide" && eigen == "eigen" && !(words >> extra) && p.size > 0 &&
                   p.halide_gflops > 0 && p.eigen_gflops > 0,
               "GEMM choice ", where, ":", number, ": expected 'gemm SIZE halide GFLOPS eigen GFLOPS', got '", line,
               "'");
    KILN_CHECK(c.points.empty() || c.points.back().size < p.size, "GEMM choice ", where, ":", number,
               ": sizes must ascend");
    c.points.push_back(p);
  }
  KILN_CHECK(!c.points.empty(), "GEMM choice ", where, ": no 'gemm' line");
  return c;
}

namespace {

struct Source {
  std::mutex mu;
  std::function<std::optional<GemmChoice>()> source;
  std::optional<GemmChoice> choice;
  bool asked = false;
};

Source& state() {
  static Source s;
  return s;
}

// The choice, asked of the source once; the caller holds s.mu.
const std::optional<GemmChoice>& choice_locked(Source& s) {
  if (!s.asked) {
    s.asked = true;
    if (s.source) s.choice = s.source();
  }
  return s.choice;
}

}  // namespace

void set_gemm_choice_source(std::function<std::optional<GemmChoice>()> source) {
  Source& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.source = std::move(source);
  s.choice.reset();
  s.asked = false;
}

std::optional<GemmChoice> machine_gemm_choice() {
  Source& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return choice_locked(s);
}

std::optional<bool> machine_prefers_eigen(int64_t macs) {
  Source& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  const std::optional<GemmChoice>& c = choice_locked(s);
  if (!c) return std::nullopt;
  return c->eigen_for(macs);
}

}  // namespace kiln
