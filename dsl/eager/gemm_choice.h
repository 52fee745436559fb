// Which CPU GEMM the eager matmul runs for a tiled problem, as measured on this machine (issue 25):
// Halide's tiled kernel and Eigen's GEMM timed on square problems of a few sizes. Which one wins
// depends on the machine: on a 2-core AMD EPYC (Zen 5) Halide ran 1024^3 at 425 GFLOP/s against
// Eigen's 360, on a 2-core Zen 4 at 191 against 207, on a 2-core Intel Sapphire Rapids at 159
// against 196. A problem runs on the backend that was faster at the measured size nearest to it in
// multiply-adds (on a log scale).
//
// The measurement is kept in the tuning database (schedules/tuning_db.h), which installs itself as
// the choice's source: on the first tiled GEMM of a process it reads this machine's record, or
// measures (about 0.3 s) and writes one. Without a source (a program that links kiln::runtime
// alone) the built-in rule of dsl/eager/matmul.cpp applies.
//
//   GemmChoice c = measure_gemm_choice();          // dsl/eager/matmul.h
//   std::cout << c.text();                         // "gemm 256 halide 186.2 eigen 149.0", ...
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace kiln {

struct GemmPoint {
  int64_t size = 0;             // the problem size^3
  double halide_gflops = 0, eigen_gflops = 0;
};

struct GemmChoice {
  std::vector<GemmPoint> points;  // by size, ascending

  // Whether a problem of this many multiply-adds runs on Eigen: the winner at the nearest point.
  bool eigen_for(int64_t macs) const;
  // One line a point: "gemm SIZE halide GFLOPS eigen GFLOPS".
  std::string text() const;
  // The text back; kiln::Error naming `where` and the line for a malformed one.
  static GemmChoice parse(const std::string& text, const std::string& where);
};

// Sets where the machine's choice comes from; the source is called once, on the first tiled GEMM
// in automatic mode after this call (none: the built-in rule).
void set_gemm_choice_source(std::function<std::optional<GemmChoice>()> source);
// The machine's choice, from the source on first use (none: no source, or it had none).
std::optional<GemmChoice> machine_gemm_choice();
// Whether a tiled problem of this many multiply-adds runs on Eigen by the machine's choice (none:
// there is no choice; the built-in rule decides).
std::optional<bool> machine_prefers_eigen(int64_t macs);

}  // namespace kiln
