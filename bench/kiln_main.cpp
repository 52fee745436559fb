// `kiln`: the command line. `kiln demo` is the main job; `kiln bench ops` measures the op
// library. Run `kiln help` for the list.
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "bench/commands.h"
#include "bench/crash_stack.h"
#include "dsl/distributed/launch.h"
#include "dsl/error.h"
#include "dsl/settings.h"

namespace {

const char* kUsage = R"(usage: kiln <command> [options]

commands:
  demo [--device cpu] [--steps N] [--precision f32|bf16|f16] [--json FILE]
        train a tiny GPT to reverse digit sequences, eagerly and compiled side by side; progress,
        summary, per-op profile; bf16 and f16 train under autocast beside an f32 compiled run
  bench ops [--device cpu] [--json FILE] [--filter NAME]
        median eager time per op: one element (host overhead) and a large tensor (throughput)
  bench models [--device cpu] [--backend halide|eager] [--scheduler kiln|mullapudi2016|adams2019|li2018]
               [--filter NAME] [--train] [--json FILE]
        every zoo model eager against compiled: median ms, compile seconds cold (empty disk cache)
        and warm (fresh process, filled disk cache), kernels per call
  bench regions [--scheduler S] [--filter NAME] [--json FILE]
        single fused regions (rows, columns, transposes, a GEMM with its epilogue) compiled
        against eager: one line per schedule template case
  bench gpu [--device cuda[:N]] [--size bench|real] [--filter NAME] [--json FILE] [--check-dir DIR]
            [--only kernels|models|attention|precision] [--profile train|inference] [--precision tf32|bf16]
            [--steps N]
        on a CUDA device: copy bandwidth, fused pointwise / softmax / layer_norm kernels (GB/s,
        compiled and eager), every zoo model eager against compiled, host overhead per call;
        --size real: every GPU schedule class at real sizes, GPT-2 small (batch 8 x 1024) and
        the real-size MLP and transformer block, inference and training step, TF32, with compile
        times, peak memory, a breakdown of the compiled step's device time and of the eager
        step's time by op and backward node, and the fused attention op alone (TFLOP/s, bf16
        and f16, forward and backward); --only runs the kernels, models or attention alone;
        --only precision trains GPT-2 small --steps N (default 200) steps in TF32, bf16 and f16
        (GradScaler, an injected overflow) on one synthetic stream and compares the losses;
        --profile picks the compiled calls that run between cuProfilerStart and cuProfilerStop
        (the window of bench/kernel_summary.cpp; default train); --precision bf16 (with --only
        models) runs the models' forward and loss under bf16 autocast
  bench ddp [--nproc N] [--device cpu|cuda] [--json FILE]
        data-parallel training across processes (started as `kiln run` does), on one process and
        on N (default 2): all_reduce per message size (ms, bus bandwidth), and a
        DistributedDataParallel training step (the MLP at bench size on the CPU, GPT-2 small at
        real size on CUDA; the same batch per process) with its scaling efficiency
  bench compile [--json FILE]
        host overhead of one call of a compiled function (guards, lookup, graph run)
  bench aot [--filter NAME] [--json FILE]
        zoo models compiled ahead of time (kiln_add_model, at build time) against JIT-compiled
        and eager on the CPU: steady-state ms, first call in a fresh process, library size
  profile MODEL [--device cpu|cuda] [--size bench|real] [--train] [--backend halide|eager] [--out FILE]
        a zoo model under the profiler: eager calls, the compiled first call (trace, graph
        passes, lowering, scheduling, code generation), compiled calls; prints the table by
        name and writes the Chrome trace (default profile.json; Perfetto opens it); on CUDA also
        where the device sat idle in the compiled calls, each gap charged to the launch it waited for
  tune MODEL [--device cpu|cuda] [--size bench|real] [--train] [--budget SECONDS] [--db DIR] [--json FILE] [--verbose]
       [--no-autoschedulers]
        tunes the schedules of a zoo model's compiled regions on the device: each distinct region
        alone, on the inputs a real call gave it, candidates of its tunables (cpu.*, gpu.*) timed and
        checked against kiln's schedule (a line per region); the faster ones are written as
        records of the tuning database DIR (default: KILN_TUNING_DB, else the kiln cache's
        tuning/), which compile() then applies on this device; the model timed default against
        tuned, with the eager GEMMs on the CPU on this machine's measured Halide/Eigen choice, and
        on the CPU beside Halide's adams2019 and mullapudi2016; each region against its bound (a
        copy of the bytes it moves, its GEMM flops at the measured rate) and the call's time with
        every region at its bound (budget default 120 s; --verbose prints every candidate)
  tune-report DIR FILE.json...
        kiln tune's --json reports as DIR/index.html: per model default, tuned, adams2019 and
        mullapudi2016 times and their geometric mean; per region SVG plots of the speedup and of
        the search's best time against trials
  tune --defaults [--db DIR]
        measures this machine's eager GEMM choice (Halide's kernel against Eigen's, sizes 32 to
        1024) into the tuning database; kiln otherwise measures it on a process's first GEMM
  explain NAME [--dump DIR]
        graphs, graph breaks (reason, file:line) and guards that compile() captures for a zoo
        model (mlp, transformer_block, norm_softmax, tiny_gpt) or an example (graph_break,
        graph_break_where, dynamic_shapes); --dump writes each graph's text and dot to DIR and,
        for a zoo model compiled on the halide backend, its fusion plan and each region's
        schedule source, stmt, stmt_html and assembly
  run --nproc N [--no-prefix] PROGRAM [ARGS...]
        starts N copies of PROGRAM for data-parallel training, as torchrun does: each with RANK,
        LOCAL_RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT (a free port) set; their output comes
        line by line prefixed "[rank k] "; when one fails the others are stopped, and its exit
        status is kiln run's
  settings
        every environment variable kiln reads: its default, what it does, and its value here
  help  this text
)";

kiln::Device parse_device(const std::string& s) {
  if (s == "cpu") return kiln::Device::cpu();
  if (s == "cuda" || s.rfind("cuda:", 0) == 0)
    return kiln::Device::cuda(s.size() > 5 ? std::stoi(s.substr(5)) : 0);
  kiln::throw_error("kiln: unknown device '", s, "' (expected cpu or cuda[:N])");
}

std::string self_path(const char* argv0) {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, size_t(n)) : std::string(argv0);
}

// The options of `kiln bench <sub>` from args[first] on; any option not in `allowed` is an error.
kiln::bench::BenchOptions parse_bench_options(const std::vector<std::string>& args, size_t first,
                                              const std::set<std::string>& allowed) {
  kiln::bench::BenchOptions o;
  std::string command = "kiln " + args[0] + " " + args[1];
  for (size_t i = first; i < args.size(); ++i) {
    const std::string& opt = args[i];
    KILN_CHECK(allowed.count(opt), command, ": unknown option '", opt, "'");
    if (opt == "--train") {  // the one flag without a value
      o.train = true;
      continue;
    }
    KILN_CHECK(i + 1 < args.size(), command, ": option ", opt, " needs a value");
    const std::string& v = args[++i];
    if (opt == "--device") o.device = parse_device(v);
    else if (opt == "--backend") o.backend = v;
    else if (opt == "--scheduler") o.scheduler = v;
    else if (opt == "--filter") o.filter = v;
    else if (opt == "--json") o.json_path = v;
    else if (opt == "--size") o.size = v;
    else if (opt == "--check-dir") o.check_dir = v;
    else if (opt == "--only") o.only = v;
    else if (opt == "--profile") o.profile = v;
    else if (opt == "--precision") o.precision = v;
    else if (opt == "--steps") o.steps = std::stoi(v);
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // progress lines reach a pipe as they are printed
  kiln::bench::print_stack_on_crash();
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "help" || args[0] == "--help" || args[0] == "-h") {
    std::fputs(kUsage, args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  try {
    auto value = [&](size_t& i) -> std::string {
      KILN_CHECK(i + 1 < args.size(), "kiln: option ", args[i], " needs a value");
      return args[++i];
    };
    if (args[0] == "demo") {
      kiln::bench::DemoOptions o;
      for (size_t i = 1; i < args.size(); ++i) {
        if (args[i] == "--device") o.device = parse_device(value(i));
        else if (args[i] == "--steps") o.steps = std::stoi(value(i));
        else if (args[i] == "--json") o.json_path = value(i);
        else if (args[i] == "--precision") o.precision = kiln::dtype_from_name(value(i));
        else kiln::throw_error("kiln demo: unknown option '", args[i], "'");
      }
      return kiln::bench::run_demo(o);
    }
    if (args[0] == "bench" && args.size() >= 2 && args[1] == "ddp") {
      int nproc = 2;
      std::vector<std::string> rest(args.begin(), args.begin() + 2);
      for (size_t i = 2; i < args.size(); ++i) {
        if (args[i] == "--nproc") nproc = std::stoi(value(i));
        else rest.push_back(args[i]);
      }
      kiln::bench::BenchOptions o = parse_bench_options(rest, 2, {"--device", "--json"});
      o.self_path = self_path(argv[0]);  // its workers are this program
      return kiln::bench::run_bench_ddp(o, nproc);
    }
    if (args[0] == "bench" && args.size() >= 3 && args[1] == "ddp-worker")
      return kiln::bench::run_bench_ddp_worker(parse_bench_options(args, 3, {"--device"}), args[2]);
    if (args[0] == "bench" && args.size() >= 2 && args[1] == "first-op") return kiln::bench::run_first_op();
    if (args[0] == "run") {
      kiln::distributed::LaunchOptions o;
      size_t i = 1;
      for (; i < args.size() && args[i].rfind("--", 0) == 0; ++i) {
        if (args[i] == "--nproc") o.nproc = std::stoi(value(i));
        else if (args[i] == "--no-prefix") o.prefix_output = false;
        else kiln::throw_error("kiln run: unknown option '", args[i], "'");
      }
      KILN_CHECK(i < args.size(), "kiln run: name the program to start (kiln run --nproc N PROGRAM ARGS...)");
      return kiln::distributed::launch(std::vector<std::string>(args.begin() + ptrdiff_t(i), args.end()), o);
    }
    if (args[0] == "settings") {
      KILN_CHECK(args.size() == 1, "kiln settings: takes no options");
      std::cout << kiln::settings_text();
      return 0;
    }
    if (args[0] == "explain") {
      std::string name, dump;
      for (size_t i = 1; i < args.size(); ++i) {
        if (args[i] == "--dump") dump = value(i);
        else if (name.empty() && args[i][0] != '-') name = args[i];
        else kiln::throw_error("kiln explain: unknown option '", args[i], "'");
      }
      if (name.empty()) {
        std::string all;
        for (const auto& n : kiln::bench::explain_names()) all += " " + n;
        kiln::throw_error("kiln explain: name a model or example:", all);
      }
      return kiln::bench::run_explain(name, dump);
    }
    if (args[0] == "profile") {
      KILN_CHECK(args.size() >= 2 && args[1][0] != '-', "kiln profile: name a zoo model (mlp, transformer_block, "
                 "norm_softmax, tiny_gpt, or at --size real gpt2_small, ...)");
      std::string out = "profile.json";
      std::vector<std::string> rest(args.begin(), args.end());
      for (size_t i = 2; i + 1 < rest.size(); ++i)
        if (rest[i] == "--out") {
          out = rest[i + 1];
          rest.erase(rest.begin() + ptrdiff_t(i), rest.begin() + ptrdiff_t(i) + 2);
          break;
        }
      kiln::bench::BenchOptions o = parse_bench_options(rest, 2, {"--device", "--size", "--train", "--backend"});
      o.filter = args[1];
      return kiln::bench::run_profile(o, out);
    }
    if (args[0] == "tune-report") {
      KILN_CHECK(args.size() >= 3, "kiln tune-report DIR FILE.json...: name the output folder and kiln tune's reports");
      return kiln::bench::run_tune_report(args[1], std::vector<std::string>(args.begin() + 2, args.end()));
    }
    if (args[0] == "tune" && args.size() >= 2 && args[1] == "--defaults") {
      KILN_CHECK(args.size() == 2 || (args.size() == 4 && args[2] == "--db"),
                 "kiln tune --defaults takes only --db DIR");
      return kiln::bench::run_tune_defaults(args.size() == 4 ? args[3] : "");
    }
    if (args[0] == "tune") {
      KILN_CHECK(args.size() >= 2 && args[1][0] != '-', "kiln tune: name a zoo model (mlp, transformer_block, "
                 "norm_softmax, tiny_gpt)");
      double budget = 120;
      std::string db;
      bool verbose = false, skip_autoschedulers = false;
      std::vector<std::string> rest(args.begin(), args.begin() + 2);
      for (size_t i = 2; i < args.size(); ++i) {
        if (args[i] == "--budget") budget = std::stod(value(i));
        else if (args[i] == "--db") db = value(i);
        else if (args[i] == "--verbose") verbose = true;
        else if (args[i] == "--no-autoschedulers") skip_autoschedulers = true;
        else rest.push_back(args[i]);
      }
      kiln::bench::BenchOptions o = parse_bench_options(rest, 2, {"--device", "--size", "--train", "--json"});
      o.filter = args[1];
      return kiln::bench::run_tune(o, budget, db, verbose, skip_autoschedulers);
    }
    if (args[0] == "bench" && args.size() >= 3 && args[1] == "aot-once") {
      kiln::bench::BenchOptions o = parse_bench_options(args, 3, {});
      o.filter = args[2];
      return kiln::bench::run_aot_once(o);
    }
    if (args[0] == "bench" && args.size() >= 3 && args[1] == "compile-once") {
      kiln::bench::BenchOptions o =
          parse_bench_options(args, 3, {"--backend", "--scheduler", "--size", "--device", "--train", "--precision"});
      o.filter = args[2];
      return kiln::bench::run_compile_once(o);
    }
    if (args[0] == "bench" && args.size() >= 2) {
      const std::string& sub = args[1];
      kiln::bench::BenchOptions o;
      if (sub == "models") {
        o = parse_bench_options(args, 2, {"--device", "--backend", "--scheduler", "--filter", "--json", "--train"});
        o.self_path = self_path(argv[0]);
        return kiln::bench::run_bench_models(o);
      }
      if (sub == "regions") return kiln::bench::run_bench_regions(parse_bench_options(args, 2, {"--scheduler", "--filter", "--json"}));
      if (sub == "gpu") {
        o = parse_bench_options(args, 2, {"--device", "--filter", "--json", "--size", "--check-dir", "--only", "--profile", "--precision", "--steps"});
        o.self_path = self_path(argv[0]);
        return kiln::bench::run_bench_gpu(o);
      }
      if (sub == "compile") return kiln::bench::run_bench_compile(parse_bench_options(args, 2, {"--json"}));
      if (sub == "aot") {
        o = parse_bench_options(args, 2, {"--filter", "--json"});
        o.self_path = self_path(argv[0]);
        return kiln::bench::run_bench_aot(o);
      }
      if (sub == "ops") {
        o = parse_bench_options(args, 2, {"--device", "--json", "--filter"});
        o.self_path = self_path(argv[0]);
        return kiln::bench::run_bench_ops(o);
      }
    }
    std::fprintf(stderr, "kiln: unknown command '%s'\n\n%s", args[0].c_str(), kUsage);
    return 2;
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
