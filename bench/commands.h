// The subcommands of the `kiln` command line.
#pragma once
#include <string>
#include <vector>

#include "dsl/device.h"
#include "dsl/dtype.h"

namespace kiln::bench {

struct BenchOptions {
  Device device = Device::cpu();
  std::string json_path;  // --json FILE
  std::string filter;     // --filter SUBSTRING (ops whose name contains it)
  std::string self_path;  // this executable, for fresh-process measurements
  std::string backend = "halide";  // bench models: the compile backend
  std::string scheduler = "kiln";  // bench models: the halide backend's scheduler
  bool train = false;              // bench models --train: training steps too
  std::string size = "bench";      // bench gpu --size bench|real: the zoo's tier (zoo::ZooSize)
  std::string check_dir;           // bench gpu --size real --check-dir DIR: files for the PyTorch check
  std::string only;                // bench gpu --size real --only kernels|models: one half of the run
  std::string profile = "train";   // bench gpu --size real --profile train|inference: the compiled calls
                                   // run between cuProfilerStart and cuProfilerStop (kernel summary)
  std::string precision = "tf32";  // bench gpu --size real, compile-once: tf32, or bf16 (autocast)
  int steps = 200;                 // bench gpu --size real --only precision: training steps per run
};

struct DemoOptions {
  Device device = Device::cpu();
  int steps = 300;
  // bf16 or f16: both runs train under autocast (f16 with a GradScaler), beside a compiled f32 run
  // of the same model on the same batches.
  DType precision = DType::f32;
  std::string json_path;
};

int run_demo(const DemoOptions& opts);
// kiln tune MODEL: opts.filter names the zoo model; schedules go to the tuning database in `db`
// (empty: KILN_TUNING_DB, else the kiln cache's tuning/ folder); `verbose` prints every candidate;
// on the CPU the model is also timed with Halide's autoschedulers unless `skip_autoschedulers`.
int run_tune(const BenchOptions& opts, double budget_s, const std::string& db, bool verbose, bool skip_autoschedulers);
// kiln tune --defaults: this machine's eager GEMM choice measured into the same database.
int run_tune_defaults(const std::string& db);
// kiln tune-report DIR FILE...: the reports of kiln tune --json as DIR/index.html with SVG plots.
int run_tune_report(const std::string& out_dir, const std::vector<std::string>& files);
// kiln profile MODEL: opts.filter names the zoo model; the trace goes to out_path.
int run_profile(const BenchOptions& opts, const std::string& out_path);
int run_bench_ops(const BenchOptions& opts);
int run_first_op();
int run_bench_compile(const BenchOptions& opts);
int run_bench_models(const BenchOptions& opts);
int run_bench_regions(const BenchOptions& opts);
// bench ddp: collectives and a DDP training step on one and on nproc processes (bench_ddp.cpp);
// bench ddp-worker: one of its processes, whose rank 0 writes its part to part_path.
int run_bench_ddp(const BenchOptions& opts, int nproc);
int run_bench_ddp_worker(const BenchOptions& opts, const std::string& part_path);
int run_bench_gpu(const BenchOptions& opts);
int run_bench_gpu_real(const BenchOptions& opts);  // bench gpu --size real
// A fresh process of bench models or bench gpu: compile opts.filter once (its training step with
// --train) at opts.size on opts.device, print "compile_s S" and "first_call_s S" (compile and
// the first run).
int run_compile_once(const BenchOptions& opts);
// kiln bench aot: the zoo models built ahead of time (bench/aot_models.cpp) against
// JIT-compiled and eager, steady state and first call in a fresh process.
int run_bench_aot(const BenchOptions& opts);
// A fresh process of bench aot: the AOT model opts.filter made from its weights and called once,
// printing "first_call_s S".
int run_aot_once(const BenchOptions& opts);
int run_explain(const std::string& name, const std::string& dump_dir);
std::vector<std::string> explain_names();  // zoo models and the examples

}  // namespace kiln::bench
