// Experiment 3: a captured graph and the code kiln generates from it. A layer norm, a linear
// layer and a GELU are compiled with the debug dump on (set_debug_dir, as KILN_DEBUG_DIR=DIR
// does): the captured graph, the fusion plan (which ops became which pipeline and why), and for
// each fused region its Halide schedule as C++ source, its lowered statement (.stmt, and .stmt.html
// to browse) and its assembly (.s). Shown here in part; `--keep DIR` keeps the files there.
// Exits non-zero when a file is missing or the compiled output differs from the eager one.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include "kiln.h"

using namespace kiln;
namespace fs = std::filesystem;

namespace {

std::vector<fs::path> files_ending(const fs::path& dir, const std::string& suffix) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    std::string n = e.path().filename().string();
    if (n.size() >= suffix.size() && n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0)
      out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The first `n` lines of a file (after the first line that contains `from`, when given).
void show(const fs::path& p, int n, const std::string& from = "") {
  std::ifstream in(p);
  std::string line;
  bool on = from.empty();
  std::printf("---- %s%s\n", p.filename().c_str(), from.empty() ? "" : (" (from \"" + from + "\")").c_str());
  while (n > 0 && std::getline(in, line)) {
    if (!on && line.find(from) != std::string::npos) on = true;
    if (!on) continue;
    std::printf("%s\n", line.c_str());
    --n;
  }
}

}  // namespace

int main(int argc, char** argv) {
  bool keep = argc > 2 && std::strcmp(argv[1], "--keep") == 0;
  fs::path dir = keep ? fs::path(argv[2]) : fs::temp_directory_path() / ("kiln-generated-code-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  set_debug_dir(dir.string());

  manual_seed(0);
  nn::LayerNorm ln(64);
  nn::Linear lin(64, 128);
  auto block = [&](const Tensor& x) { return gelu(lin.forward(ln.forward(x))) * 2.0 + 1.0; };
  auto f = compile(block, {.backend = "halide", .name = "block"});
  Tensor x = randn({32, 64});
  NoGradGuard no_grad;
  double diff = abs(f(x) - block(x)).max().item<double>();

  ExplainReport r = explain(f, x);
  std::printf("%s\n", r.text().c_str());
  std::vector<fs::path> plans = files_ending(dir, ".plan.txt"), schedules = files_ending(dir, ".schedule.cpp"),
                        stmts = files_ending(dir, ".stmt"), assembly = files_ending(dir, ".s");
  if (!plans.empty()) show(plans[0], 40);
  if (!schedules.empty()) show(schedules[0], 40);
  if (!stmts.empty()) show(stmts[0], 30, "produce");
  if (!assembly.empty()) show(assembly[0], 30, "%bb.0");
  std::printf("\n%zu fusion plans, %zu schedules, %zu statements, %zu assembly files in %s\n", plans.size(),
              schedules.size(), stmts.size(), assembly.size(), dir.c_str());
  std::printf("max |compiled - eager| = %.3g\n", diff);
  bool ok = !plans.empty() && !schedules.empty() && stmts.size() == schedules.size() &&
            assembly.size() == schedules.size() && diff < 1e-4;
  if (!keep) fs::remove_all(dir);
  return ok ? 0 : 1;
}
