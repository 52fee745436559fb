// CUDA against the CPU, eager and compiled: the differential fuzzer's random programs of Tensor
// ops (support/fuzz_program.h) run on CUDA tensors must match the same programs on the CPU,
// eagerly (every eager CUDA kernel in many combinations of shapes, strides, broadcasts and dtypes)
// and compiled by the halide backend (kiln's GPU schedules); so must every zoo model, compiled on
// CUDA. KILN_FUZZ_PROGRAMS sets the number of eager programs (default 300; a fifth are compiled),
// KILN_FUZZ_FIRST_SEED the first seed, KILN_FUZZ_PRINT=1 prints each program before it runs.
#include <cstdlib>
#include <functional>
#include <iostream>

#include "cuda/cuda_available.h"
#include "support/fuzz_compare.h"
#include "support/fuzz_program.h"
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
