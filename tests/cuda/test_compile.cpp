// CUDA against the CPU, eager and compiled: the differential fuzzer's random programs of Tensor
// ops (support/fuzz_program.h) run on CUDA tensors must match the same programs on the CPU,
// eagerly (every eager CUDA kernel in many combinations of shapes, strides, broadcasts and dtypes)
// and compiled by the halide backend (kiln's GPU schedules); so must every zoo model, compiled on
// CUDA. KILN_FUZZ_PROGRAMS sets the number of eager programs (default 300; a fifth are compiled),
// KILN_FUZZ_FIRST_SEED the first seed, KILN_FUZZ_PRINT=1 prints each program before it runs.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <regex>
#include <unistd.h>

#include "cuda/cuda_available.h"
#include "support/fuzz_compare.h"
#include "support/fuzz_program.h"
#include "support/scoped_env.h"
#include "bench/train_step.h"
#include "bench/zoo.h"

using namespace kiln;
using namespace kiln::test;

namespace {

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : fallback;
}

int program_count() { return env_int("KILN_FUZZ_PROGRAMS", 300); }

// The program of `seed`, printed first when KILN_FUZZ_PRINT is set (a crash then names it).
FuzzProgram program(int seed, const FuzzConfig& c) {
  FuzzProgram p = generate_program(uint64_t(seed), c);
  if (env_int("KILN_FUZZ_PRINT", 0)) std::cout << program_to_cpp(p) << std::endl;
  return p;
}

// "" when every output of `got` (on CUDA) matches `want` (on the CPU).
std::string compare(const FuzzProgram& p, const TensorList& got, const TensorList& want) {
  for (size_t i = 0; i < want.size(); ++i) {
    if (got[i].device() != kCuda) return "output " + std::to_string(i) + " is not on cuda:0";
    std::string d = mismatch(got[i], want[i], output_tolerance(p.outputs[i], want[i], true));
    if (!d.empty()) return "output " + std::to_string(i) + ": " + d;
  }
  return "";
}

FuzzConfig config() {
  FuzzConfig c;
  c.low_precision = true;
  return c;
}

// Runs `run` (the outputs on CUDA of one program) on n programs from `first` on, against the
// programs on the CPU; reports the first five that differ or fail, with their C++.
void check_programs(int first, int n, const std::function<TensorList(const FuzzProgram&, int, const TensorList&)>& run) {
  int failures = 0, compared = 0;
  for (int seed = first; seed < first + n && failures < 5; ++seed, ++compared) {
    FuzzProgram p = program(seed, config());
    TensorList xs = make_inputs(p, uint64_t(seed) + 1);
    std::string d;
    try {
      manual_seed(7);
      TensorList want = run_program(p, xs);
      manual_seed(7);
      d = compare(p, run(p, seed, to_cuda(xs)), want);
    } catch (const std::exception& e) {
      d = std::string("error: ") + e.what();
    }
    if (!d.empty()) {
      ++failures;
      BOOST_ERROR("seed " << seed << ": " << d << "\n" << program_to_cpp(p));
    }
  }
  BOOST_TEST_MESSAGE(compared << " programs compared, " << failures << " differ");
  BOOST_TEST(failures == 0);
}

}  // namespace

BOOST_AUTO_TEST_CASE(eager_cuda_programs_match_the_cpu, *needs_cuda()) {
  check_programs(env_int("KILN_FUZZ_FIRST_SEED", 0), program_count(),
                 [](const FuzzProgram& p, int, const TensorList& xs) { return run_program(p, xs); });
}

BOOST_AUTO_TEST_CASE(compiled_cuda_programs_match_the_cpu, *needs_cuda()) {
  check_programs(1000 + env_int("KILN_FUZZ_FIRST_SEED", 0), std::max(1, program_count() / 5),
                 [](const FuzzProgram& p, int seed, const TensorList& xs) {
                   auto f = compile([&p](std::vector<Tensor> v) { return run_program(p, v); },
                                    {.backend = "halide", .name = "cuda_fuzz_" + std::to_string(seed)});
                   return f(xs);
                 });
}

BOOST_AUTO_TEST_CASE(zoo_models_compiled_on_cuda_match_the_cpu, *needs_cuda()) {
  NoGradGuard no_grad;
  for (const std::string& name : zoo::zoo_names()) {
    BOOST_TEST_CONTEXT(name) {
      manual_seed(1);
      zoo::ZooModel cpu = zoo::make_zoo_model(name, zoo::ZooSize::test);
      manual_seed(1);
      zoo::ZooModel gpu = zoo::make_zoo_model(name, zoo::ZooSize::test, kCuda);
      manual_seed(2);
      TensorList xs = cpu.make_inputs();
      Tensor want = cpu.forward(xs)[0];
      zoo::ZooFunction f = zoo::compile_zoo_model(gpu, {.backend = "halide", .name = "cuda_zoo_" + name});
      for (int call = 0; call < 2; ++call) {  // the second call runs the cached graph
        Tensor got = f(to_cuda(xs))[0];
        check_close(got.to(Device::cpu()), host_values(want), want.shape(), {1e-4, 1e-4}, name + " compiled");
      }
      Tensor eager = gpu.forward(to_cuda(xs))[0];
      check_close(eager.to(Device::cpu()), host_values(want), want.shape(), {1e-4, 1e-4}, name + " eager");
    }
  }
}

// Compiled training on CUDA: the whole SGD step (forward, loss, backward, update, written back)
// of every zoo model, and the gradients of its compiled forward on the tape, against the CPU's
// eager tape.
BOOST_AUTO_TEST_CASE(zoo_training_steps_compiled_on_cuda_match_the_cpu, *needs_cuda()) {
  for (const std::string& name : zoo::zoo_names()) {
    BOOST_TEST_CONTEXT(name) {
      manual_seed(3);
      zoo::ZooModel cpu = zoo::make_zoo_model(name, zoo::ZooSize::test);
      manual_seed(3);
      zoo::ZooModel gpu = zoo::make_zoo_model(name, zoo::ZooSize::test, kCuda);
      optim::SGD cpu_opt(cpu.module->parameters(), {.lr = 0.05, .momentum = 0.9});
      optim::SGD gpu_opt(gpu.module->parameters(), {.lr = 0.05, .momentum = 0.9});
      // forward, loss, backward, step, zero_grad
      auto step = [](zoo::ZooModel& m, optim::Optimizer& o, const TensorList& in) { return bench::train_step(m, o, in); };
      auto f = compile([&](std::vector<Tensor> xs) { return step(gpu, gpu_opt, xs); },
                       {.backend = "halide", .fullgraph = true, .name = "cuda_train_" + name});
      for (int i = 0; i < 2; ++i) {
        manual_seed(10 + uint64_t(i));
        TensorList xs = cpu.make_inputs();
        Tensor want = step(cpu, cpu_opt, xs);
        Tensor got = f(to_cuda(xs));
        check_close(got.to(Device::cpu()), host_values(want), {}, {1e-4, 1e-5}, name + " loss");
        TensorList pc = cpu.module->parameters(), pg = gpu.module->parameters();
        for (size_t k = 0; k < pc.size(); ++k)
          check_close(pg[k].to(Device::cpu()), host_values(pc[k]), pc[k].shape(), {1e-4, 1e-5},
                      name + " parameter " + std::to_string(k) + " after step " + std::to_string(i));
      }
      BOOST_TEST(f.stats().compiles == 1);
      // The compiled forward alone, its backward on the tape.
      auto fl = zoo::compile_zoo_loss(gpu, {.backend = "halide", .name = "cuda_loss_" + name});
      TensorList xs = cpu.make_inputs();
      fl(to_cuda(xs)).backward();
      cpu.loss(cpu.forward(xs)).backward();
      TensorList pc = cpu.module->parameters(), pg = gpu.module->parameters();
      for (size_t k = 0; k < pc.size(); ++k)
        check_close(pg[k].grad().to(Device::cpu()), host_values(pc[k].grad()), pc[k].shape(), {1e-3, 1e-4},
                    name + " gradient " + std::to_string(k));
    }
  }
}

// Row ops whose row count the rows of a block do not divide (a warp-row op takes several short
// rows a block and computes their reductions for all of them): softmax of [1000, 64] once read
// rows up to 1007. Odd, prime and plain counts, short and long rows, against the CPU.
BOOST_AUTO_TEST_CASE(row_ops_over_any_row_count_match_the_cpu, *needs_cuda()) {
  auto ops = [](std::vector<Tensor> v) {
    const Tensor& x = v[0];
    int64_t n = x.shape().back();
    return TensorList{softmax(x, -1), log_softmax(x, -1), sum(x, {-1}),
                      layer_norm(x, {n}, v[1], v[2])};
  };
  for (Shape s : {Shape{1000, 64}, Shape{997, 48}, Shape{1001, 1024}, Shape{13, 3000}, Shape{6, 33}, Shape{37, 2048}}) {
    BOOST_TEST_CONTEXT(to_string(s)) {
      BOOST_TEST_MESSAGE("rows: " << to_string(s));  // a kernel that never finishes shows where
      manual_seed(uint64_t(s[0]));
      TensorList xs = {randn(s), randn({s[1]}), randn({s[1]})};
      TensorList want = ops(xs);
      auto f = compile(ops, {.backend = "halide", .name = "cuda_rows_" + std::to_string(s[0])});
      TensorList got = f(to_cuda(xs));
      BOOST_TEST_REQUIRE(got.size() == want.size());
      for (size_t i = 0; i < want.size(); ++i)
        check_close(got[i].to(Device::cpu()), host_values(want[i]), want[i].shape(), {1e-4, 1e-5},
                    "output " + std::to_string(i));
    }
  }
}

// A layer norm's backward that recomputes its row statistics, as the bench's layernorm_bwd_rows
// and torch.compile's twin write it: the mean and 1/std are computed in the gradient's rows
// (gpu_schedule.cpp, hosted_rows), a warp or a block per row; beside a weight gradient (a column
// sum of x-hat) they stay stored. Against the CPU, over short, odd and long rows.
BOOST_AUTO_TEST_CASE(layer_norm_backward_with_its_statistics_in_its_rows_matches_the_cpu, *needs_cuda()) {
  auto backward = [](bool weight_gradient) {
    return [weight_gradient](std::vector<Tensor> v) {
      const Tensor &x = v[0], &w = v[1], &dy = v[2];
      Tensor xc = x - mean(x, {-1}, true);
      Tensor rstd = rsqrt(mean(xc * xc, {-1}, true) + 1e-5);
      Tensor xhat = xc * rstd, g = dy * w;
      Tensor dx = rstd * (g - mean(g, {-1}, true) - xhat * mean(g * xhat, {-1}, true));
      if (!weight_gradient) return TensorList{dx};
      return TensorList{dx, sum(dy * xhat, {0})};
    };
  };
  for (Shape s : {Shape{1000, 64}, Shape{6, 33}, Shape{997, 768}, Shape{64, 4096}, Shape{13, 3000}}) {
    for (bool weight_gradient : {false, true}) {
      BOOST_TEST_CONTEXT(to_string(s) << (weight_gradient ? " with a weight gradient" : "")) {
        BOOST_TEST_MESSAGE("layer norm backward: " << to_string(s) << (weight_gradient ? " with a weight gradient" : ""));
        manual_seed(uint64_t(s[0] + s[1]));
        TensorList xs = {randn(s), randn({s[1]}), randn(s)};
        TensorList want = backward(weight_gradient)(xs);
        auto f = compile(backward(weight_gradient), {.backend = "halide", .name = "cuda_ln_backward_" + std::to_string(s[0]) + (weight_gradient ? "_w" : "")});
        TensorList got = f(to_cuda(xs));
        BOOST_TEST_REQUIRE(got.size() == want.size());
        for (size_t i = 0; i < want.size(); ++i)
          check_close(got[i].to(Device::cpu()), host_values(want[i]), want[i].shape(), {1e-4, 1e-4},
                      "output " + std::to_string(i));
      }
    }
  }
}

// Fuzz seed 1023 (a sum over dims {0, 1, 3} of a log_softmax over dim 1, times that log_softmax)
// gave values 1.3x too large on CUDA: the warp-row sum read its 24 elements in vector steps of
// 16, and Halide dropped the guard of the second step (schedules/gpu_schedule.cpp,
// warp_reduction_lanes). Its parts, and rows of 24, 48 and 32 elements, against the CPU.
BOOST_AUTO_TEST_CASE(reductions_over_outer_and_inner_dims_match_the_cpu, *needs_cuda()) {
  using Fn = std::function<TensorList(std::vector<Tensor>)>;
  const std::vector<std::pair<std::string, Fn>> cases = {
      {"log_softmax over dim 1", [](std::vector<Tensor> v) { return TensorList{log_softmax(v[0], 1)}; }},
      {"sum over {0, 1, 3}", [](std::vector<Tensor> v) { return TensorList{sum(v[0], {0, 1, 3}, true)}; }},
      {"sum of log_softmax", [](std::vector<Tensor> v) { return TensorList{sum(log_softmax(v[0], 1), {0, 1, 3}, true)}; }},
      {"log_softmax times its sum",
       [](std::vector<Tensor> v) {
         Tensor l = log_softmax(v[0], 1);
         return TensorList{mul(l, sum(l, {0, 1, 3}, true))};
       }},
      {"seed 1023's chain",
       [](std::vector<Tensor> v) {
         Tensor r = relu(mul(v[0], sigmoid(v[0])));
         Tensor l = log_softmax(transpose(r, -3, 1), 1);
         return TensorList{mul(l, sum(l, {0, 1, 3}, true))};
       }},
  };
  int index = 0;
  for (Shape s : {Shape{1, 3, 7, 8}, Shape{1, 1, 7, 24}, Shape{1, 3, 7, 16}, Shape{2, 1, 5, 32}}) {
    for (const auto& [label, fn] : cases) {
      BOOST_TEST_CONTEXT(label << " of " << to_string(s)) {
        manual_seed(1023);
        TensorList xs = {randn(s)};
        TensorList want = fn(xs);
        auto f = compile(fn, {.backend = "halide", .name = "cuda_dims_" + std::to_string(index++)});
        TensorList got = f(to_cuda(xs));
        for (size_t i = 0; i < want.size(); ++i)
          check_close(got[i].to(Device::cpu()), host_values(want[i]), want[i].shape(), {1e-4, 1e-5},
                      "output " + std::to_string(i));
      }
    }
  }
}

// A region's own schedule file (schedules/region_schedule.h) on the GPU: a layer norm's rows,
// compiled with kiln's defaults, then with a file for each of its regions (by the key the
// schedule dump prints) that gives it 512 threads a row and unrolls its reductions by 4. The second compile
// applies the file (its dump says so) and computes the same values (within f32 rounding: the
// row sums are added in another order).
BOOST_AUTO_TEST_CASE(a_region_schedule_file_gives_the_default_schedules_values, *needs_cuda()) {
  auto dir = std::filesystem::temp_directory_path() / ("kiln-cuda-region-schedule-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "dump");
  std::filesystem::create_directories(dir / "schedules");
  auto fn = [](std::vector<Tensor> v) {
    return TensorList{layer_norm(v[0] * 2.0 + 1.0, {3000}, v[1], v[2], 1e-5)};
  };
  manual_seed(25);
  TensorList xs = to_cuda({randn({257, 3000}), randn({3000}), randn({3000})});
  auto dumped_key = [&]() {
    std::regex key_line("region schedule key ([0-9a-f]{16})(, its schedule file applied)?");
    std::vector<std::pair<std::string, bool>> keys;
    for (const auto& e : std::filesystem::directory_iterator(dir / "dump")) {
      std::string text = test::file_bytes(e.path().string());
      for (std::sregex_iterator m(text.begin(), text.end(), key_line), end; m != end; ++m)
        keys.emplace_back((*m)[1].str(), (*m)[2].matched);
    }
    std::filesystem::remove_all(dir / "dump");
    std::filesystem::create_directories(dir / "dump");
    return keys;
  };
  // A disk cache of its own: both compiles build their regions (and dump their schedules).
  test::ScopedEnv cache("KILN_CACHE_DIR", (dir / "cache").c_str());
  set_debug_dir((dir / "dump").string());
  TensorList want = compile(fn, {.backend = "halide", .name = "cuda_schedule_file_default"})(xs);
  std::vector<std::pair<std::string, bool>> keys = dumped_key();
  BOOST_TEST_REQUIRE(!keys.empty());
  for (const auto& [key, applied] : keys) {
    BOOST_TEST(!applied);
    std::ofstream f(dir / "schedules" / (key + ".schedule"));
    f << "# the layer norm's rows: twice the default threads\ngpu.row.threads 512\ngpu.row.unroll 4\n";
  }
  test::ScopedEnv schedules("KILN_SCHEDULE_DIR", (dir / "schedules").c_str());
  TensorList got = compile(fn, {.backend = "halide", .name = "cuda_schedule_file_tuned"})(xs);
  std::vector<std::pair<std::string, bool>> tuned = dumped_key();
  BOOST_TEST_REQUIRE(tuned.size() == keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    BOOST_TEST(tuned[i].first == keys[i].first);
    BOOST_TEST(tuned[i].second, "region " << keys[i].first << ": its schedule file was not applied");
  }
  check_close(got[0].to(Device::cpu()), host_values(want[0].to(Device::cpu())), want[0].shape(), {1e-5, 1e-5}, "layer norm");
  set_debug_dir("");
  std::filesystem::remove_all(dir);
}

// GPT-2's input at its real size: token and position embeddings gathered inside the first layer
// norm's region (the gathers clamp their indices), a block a row of 768. The tables are read at
// the rows the indices pick, so the schedule stages none of their rows (gpu_row_staging.cpp:
// their readers' readers gather); against the CPU on random tokens.
BOOST_AUTO_TEST_CASE(embeddings_gathered_inside_a_layer_norm_region_match_the_cpu, *needs_cuda()) {
  auto fn = [](std::vector<Tensor> v) {
    Tensor positions = arange(0, double(v[0].size(1)), 1, {.dtype = DType::i64, .device = v[0].device()});
    Tensor x = embedding(v[1], v[0]) + embedding(v[2], positions);
    return TensorList{layer_norm(x, {v[1].size(1)}, v[3], v[4], 1e-5)};
  };
  manual_seed(50304);
  TensorList xs = {randint(0, 50304, {8, 1024}, {.dtype = DType::i64}), randn({50304, 768}), randn({1024, 768}),
                   randn({768}), randn({768})};
  TensorList want = fn(xs);
  TensorList got = compile(fn, {.backend = "halide", .name = "cuda_gpt2_input"})(to_cuda(xs));
  check_close(got[0].to(Device::cpu()), host_values(want[0]), want[0].shape(), {1e-4, 1e-4}, "layer_norm of the embeddings");
}
