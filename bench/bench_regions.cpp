// `kiln bench regions`: single fused regions on the halide backend (kiln's schedule, or --scheduler)
// against the same ops eagerly: one line per pattern, each a schedule template's case (rows,
// columns, transposes, pointwise chains, a GEMM with its epilogue). Medians after warm-up, both in
// the same run; the disk cache is off, so each compile is real.
#include <cstdio>
#include <functional>

#include "bench/commands.h"
#include "bench/json.h"
#include "bench/timing.h"
#include "kiln.h"
#include "schedules/disk_cache.h"

namespace kiln::bench {

namespace {

struct Pattern {
  std::string name, what;
  std::function<Tensor(const Tensor&)> fn;
  Shape shape;
};

std::vector<Pattern> patterns() {
  static Tensor mask = ge(arange(256.0).unsqueeze(1), arange(256.0).unsqueeze(0));
  static Tensor w = randn({1024, 1024}) * 0.03, b = randn({1024});
  return {
      {"pointwise", "exp(x) * 2 + 1", [](const Tensor& x) { return exp(x) * 2.0 + 1.0; }, {2048, 2048}},
      {"sum_rows", "x.sum(1)", [](const Tensor& x) { return x.sum({1}); }, {2048, 2048}},
      {"sum_columns", "x.sum(0)", [](const Tensor& x) { return x.sum({0}); }, {2048, 2048}},
      {"sum_all", "(x * x).mean()", [](const Tensor& x) { return (x * x).mean(); }, {2048, 2048}},
      {"softmax_rows", "softmax(x, -1)", [](const Tensor& x) { return softmax(x, -1); }, {2048, 2048}},
      {"softmax_columns", "softmax(x, 0)", [](const Tensor& x) { return softmax(x, 0); }, {2048, 2048}},
      {"attention_softmax", "softmax(where(causal, s / 8, -1e30))",
       [](const Tensor& s) { return softmax(where(mask, s * 0.125, full({}, -1e30)), -1); }, {4, 8, 256, 256}},
      {"layer_norm_chain", "layer_norm(layer_norm(x) * 2)",
       [](const Tensor& x) { return layer_norm(layer_norm(x, {1024}) * 2.0, {1024}); }, {2048, 1024}},
      {"transpose", "x.t().contiguous()", [](const Tensor& x) { return x.t().contiguous(); }, {2048, 2048}},
      {"add_transposed", "x + x.t()", [](const Tensor& x) { return x + x.t(); }, {2048, 2048}},
      {"linear_gelu", "gelu(x @ w.t() + b), 64x1024x1024",
       [](const Tensor& x) { return gelu(matmul(x, w.t()) + b); }, {64, 1024}},
  };
}

}  // namespace

int run_bench_regions(const BenchOptions& opts) {
  NoGradGuard no_grad;
  manual_seed(0);
  set_disk_cache_enabled(false);
  Json rows = Json::array();
  std::printf("halide backend, scheduler %s, device cpu, medians after warm-up\n", opts.scheduler.c_str());
  std::printf("%-18s %-40s %10s %12s %8s\n", "pattern", "what", "eager ms", "compiled ms", "ratio");
  for (const Pattern& p : patterns()) {
    if (!opts.filter.empty() && p.name.find(opts.filter) == std::string::npos) continue;
    Tensor x = randn(p.shape);
    auto f = compile(p.fn, {.backend = "halide", .scheduler = opts.scheduler, .name = p.name});
    f(x);
    double e = time_median([&] { p.fn(x); }, 1, 2, 11, 0.3, 100).median_s * 1e3;
    double c = time_median([&] { f(x); }, 1, 2, 11, 0.3, 100).median_s * 1e3;
    std::printf("%-18s %-40s %10.3f %12.3f %8.2f\n", p.name.c_str(), p.what.c_str(), e, c, c / e);
    std::fflush(stdout);
    Json j = Json::object();
    j.set("name", p.name).set("what", p.what).set("eager_ms", e).set("compiled_ms", c);
    rows.push(j);
  }
  if (!opts.json_path.empty()) {
    Json report = Json::object();
    report.set("suite", "regions").set("device", "cpu").set("scheduler", opts.scheduler).set("regions", rows);
    write_file_atomic(opts.json_path, report.dump());
    std::printf("wrote %s\n", opts.json_path.c_str());
  }
  return 0;
}

}  // namespace kiln::bench
