// `kiln bench aot`: the zoo models compiled ahead of time (bench/aot_models.cpp, built by
// kiln_add_model with kiln) against the same models JIT-compiled by kiln::compile and eager, on
// the CPU at bench size: steady-state medians after warm-up in one process, and the first call in
// a fresh process (median of 3): the AOT model made from its weights and called once, against
// kiln::compile's trace, compile and run with an empty disk cache (cold) and a filled one (warm).
// Weights come from the zoo model in both cases, so loading a file is in neither. Also the size
// of each model's static library. The AOT model must equal the JIT-compiled one bit for bit.
// Then size specializations: a row chain built with a dynamic row length, generic against a
// specialize() branch for lengths divisible by 16 (kiln_add_model's SPECIALIZE).
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>

#include "aot/model.h"
#include "bench/commands.h"
#include "bench/fresh_process.h"
#include "bench/json.h"
#include "bench/timing.h"
#include "bench/zoo.h"
#include "bench_aot_mlp.h"
#include "bench_aot_transformer_block.h"
#include "bench_aot_transformer_block_test.h"
#include "bench_aot_row_chain.h"
#include "bench_aot_row_chain_dynamic.h"
#include "bench_aot_row_chain_specialized.h"
#include "schedules/disk_cache.h"

namespace kiln::bench {

namespace {

struct AotModel {
  const char* name;  // the zoo model's
  zoo::ZooSize size;
  const aot::ModelCode& (*code)();
  const char* library;  // the static library kiln_add_model built
};

const AotModel kModels[] = {
    {"transformer_block", zoo::ZooSize::test, &bench_aot_transformer_block_test::code,
     KILN_BENCH_AOT_TRANSFORMER_BLOCK_TEST_LIBRARY},
    {"mlp", zoo::ZooSize::bench, &bench_aot_mlp::code, KILN_BENCH_AOT_MLP_LIBRARY},
    {"transformer_block", zoo::ZooSize::bench, &bench_aot_transformer_block::code,
     KILN_BENCH_AOT_TRANSFORMER_BLOCK_LIBRARY},
};

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.contiguous().data_ptr(), b.contiguous().data_ptr(), size_t(a.numel()) * itemsize(a.dtype())) == 0;
}

// The row chain (bench/aot_models.cpp) with a dynamic row length, [2048, cols]: generic, and with
// a branch for cols % 16 == 0, each on lengths that satisfy it and lengths that do not; the static
// build at 1024 beside them.
Json measure_specialization() {
  manual_seed(0);
  const std::map<std::string, Tensor> none;  // no weights
  aot::Model generic(bench_aot_row_chain_dynamic::code(), none);
  aot::Model specialized(bench_aot_row_chain_specialized::code(), none);
  aot::Model fixed(bench_aot_row_chain::code(), none);
  std::printf("\nrow chain [2048, cols] (log_softmax(gelu(x) + softmax(2x))), cols dynamic: generic against a "
              "specialize() branch for cols %% 16 == 0\n"
              "%8s %11s %15s %9s %10s\n", "cols", "generic ms", "specialized ms", "ratio", "static ms");
  Json rows = Json::array();
  for (int64_t cols : {1024, 1000, 2048, 2040}) {
    Tensor x = randn({2048, cols});
    bool same = same_bits(generic.run({x})[0], specialized.run({x})[0]);
    Timing g = time_median([&] { generic.run({x}); }, 1, 3, 15, 0.5, 200);
    Timing s = time_median([&] { specialized.run({x}); }, 1, 3, 15, 0.5, 200);
    double gm = g.median_s * 1e3, sm = s.median_s * 1e3, st = -1;
    if (cols == 1024) st = time_median([&] { fixed.run({x}); }, 1, 3, 15, 0.5, 200).median_s * 1e3;
    std::printf("%8lld %11.3f %15.3f %9.3f %10s%s\n", static_cast<long long>(cols), gm, sm, gm / sm,
                st < 0 ? "-" : std::to_string(st).substr(0, 6).c_str(), same ? "" : "  (outputs differ!)");
    Json j = Json::object();
    j.set("cols", cols);
    j.set("holds", cols % 16 == 0);
    j.set("generic_ms", gm);
    j.set("specialized_ms", sm);
    j.set("speedup", gm / sm);
    j.set("static_ms", st < 0 ? Json(nullptr) : Json(st));
    j.set("same_bits", same);
    rows.push(j);
  }
  return rows;
}

std::string label(const AotModel& m) { return std::string(m.name) + "/" + zoo::zoo_size_name(m.size); }

const AotModel& find_model(const std::string& name) {
  std::string names;
  for (const AotModel& m : kModels) {
    if (name == label(m)) return m;
    names.append(" ").append(label(m));  // (" " + label(m) trips GCC 12's -Wrestrict, a false positive)
  }
  throw_error("kiln bench aot: no AOT model '", name, "' (there are:", names, ")");
}

std::map<std::string, Tensor> weights_of(const zoo::ZooModel& m) {
  std::map<std::string, Tensor> w;
  for (auto& [name, t] : m.module->named_parameters()) w[name] = t;
  return w;
}


}  // namespace

int run_aot_once(const BenchOptions& opts) {
  const AotModel& a = find_model(opts.filter);
  manual_seed(0);
  zoo::ZooModel m = zoo::make_zoo_model(a.name, a.size);
  TensorList in = m.make_inputs();
  std::map<std::string, Tensor> weights = weights_of(m);
  NoGradGuard no_grad;
  double t0 = now_seconds();
  aot::Model model(a.code(), weights);
  double t1 = now_seconds();
  model.run(in);
  double t2 = now_seconds();
  model.run(in);
  double t3 = now_seconds();
  std::printf("first_call_s %.6f\nload_s %.6f\nsecond_call_s %.6f\n", t2 - t0, t1 - t0, t3 - t2);
  return 0;
}

int run_bench_aot(const BenchOptions& opts) {
  NoGradGuard no_grad;
  // A disk cache of the run's own, its Halide runtime built before anything is timed.
  std::string cache_dir = (std::filesystem::temp_directory_path() / ("kiln-bench-aot-" + std::to_string(::getpid()))).string();
  std::filesystem::remove_all(cache_dir);
  set_disk_cache_dir(cache_dir);
  ::setenv("KILN_CACHE_DIR", cache_dir.c_str(), 1);  // for the fresh processes
  compile([](const Tensor& x) { return x + 1.0; }, {.backend = "halide"})(full({4}, 1.0));
  std::string self = "'" + opts.self_path + "' bench ";
  Json models = Json::array();
  std::printf("device cpu; first calls: AOT and JIT warm in fresh processes (median of 3), JIT cold in "
              "this one\n%-24s %9s %9s %9s %7s %8s %10s %11s %11s %8s\n",
              "model", "aot ms", "jit ms", "eager ms", "aot/jit", "load ms", "aot 1st ms", "jit warm ms", "jit cold ms",
              "lib KiB");
  for (const AotModel& a : kModels) {
    if (!opts.filter.empty() && label(a).find(opts.filter) == std::string::npos) continue;
    manual_seed(0);
    zoo::ZooModel m = zoo::make_zoo_model(a.name, a.size);
    TensorList in = m.make_inputs();
    zoo::ZooFunction f = zoo::compile_zoo_model(m, {.backend = "halide", .name = m.name});
    double t0 = now_seconds();
    TensorList jit_out = f(in);
    double jit_cold = now_seconds() - t0;
    aot::Model model(a.code(), weights_of(m));
    bool same = same_bits(model.run(in).at(0), jit_out.at(0));
    Timing aot_t = time_median([&] { model.run(in); }, 1, 3, 15, 0.5, 200);
    Timing jit_t = time_median([&] { f(in); }, 1, 3, 15, 0.5, 200);
    Timing eager_t = time_median([&] { m.forward(in); }, 1, 3, 15, 0.5, 200);
    double aot_first = fresh_process_median(self + "aot-once " + label(a), "first_call_s", 3, "kiln bench aot");
    double load_ms = fresh_process_median(self + "aot-once " + label(a), "load_s", 3, "kiln bench aot") * 1e3;
    double jit_warm = fresh_process_median(self + "compile-once " + a.name + " --size " + zoo::zoo_size_name(a.size),
                                           "first_call_s", 3, "kiln bench aot");
    std::error_code ec;
    double lib_kib = double(std::filesystem::file_size(a.library, ec)) / 1024;
    if (ec) lib_kib = -1;

    double am = aot_t.median_s * 1e3, jm = jit_t.median_s * 1e3, em = eager_t.median_s * 1e3;
    std::printf("%-24s %9.3f %9.3f %9.3f %7.3f %8.2f %10.2f %11.1f %11.1f %8.0f%s\n", label(a).c_str(), am, jm, em,
                am / jm, load_ms, aot_first * 1e3, jit_warm * 1e3, jit_cold * 1e3, lib_kib,
                same ? "" : "  (AOT differs from JIT!)");
    std::fflush(stdout);
    Json j = Json::object();
    j.set("name", a.name);
    j.set("size", zoo::zoo_size_name(a.size));
    j.set("aot_load_ms", load_ms);
    j.set("aot_ms", am);
    j.set("jit_ms", jm);
    j.set("eager_ms", em);
    j.set("aot_over_jit", am / jm);
    j.set("aot_first_call_ms", aot_first * 1e3);
    j.set("jit_first_call_cold_ms", jit_cold * 1e3);
    j.set("jit_first_call_warm_ms", jit_warm * 1e3);
    j.set("library_bytes", lib_kib < 0 ? Json(nullptr) : Json(lib_kib * 1024));
    j.set("aot_equals_jit_bitwise", same);
    models.push(j);
  }
  Json specialization = opts.filter.empty() || std::string("row_chain").find(opts.filter) != std::string::npos
                            ? measure_specialization()
                            : Json::array();
  if (!opts.json_path.empty()) {
    Json report = Json::object();
    report.set("suite", "aot");
    report.set("device", "cpu");
    report.set("models", models);
    report.set("specialization", specialization);
    write_file_atomic(opts.json_path, report.dump());
    std::printf("wrote %s\n", opts.json_path.c_str());
  }
  std::filesystem::remove_all(cache_dir);
  return 0;
}

}  // namespace kiln::bench
