// The region tuner on CUDA (schedules/region_tuner.h): a softmax region recorded on the GPU is
// tuned over the CUDA schedule's tunables on its recorded inputs, within its budget, and the
// schedule it gives (or one that surely changes the kernel) compiles and computes the softmax.
#include <chrono>
#include <fstream>

#include "cuda/cuda_available.h"
#include "dsl/cuda/cuda_context.h"
#include "schedules/region_schedule.h"
#include "schedules/region_tuner.h"
#include "support/reference.h"
#include "support/scoped_env.h"

using namespace kiln;
using namespace kiln::test;

BOOST_AUTO_TEST_CASE(a_cuda_region_is_tuned_on_its_recorded_inputs, *needs_cuda()) {
  manual_seed(4);
  Tensor cpu_x = randn({4096, 1024});
  Tensor x = cpu_x.to(kCuda);
  auto fn = [](Tensor a) { return softmax(a, -1) * 3.0; };
  auto f = compile(fn, {.backend = "halide"});
  NoGradGuard no_grad;
  f(x);
  std::vector<RecordedRegion> regions;
  {
    RegionRecorder recorder;
    f(x);
    regions = recorder.regions();
  }
  BOOST_TEST_REQUIRE(regions.size() == 1u);
  const RecordedRegion& r = regions[0];
  BOOST_TEST(r.device == kCuda);
  BOOST_TEST(r.inputs.at(0).device() == kCuda);
  std::vector<std::string> lines;
  auto t0 = std::chrono::steady_clock::now();
  TuneResult t = tune_region(r, {.budget_s = 20}, [&](const std::string& l) { lines.push_back(l); });
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (const std::string& l : lines) BOOST_TEST_MESSAGE(l);
  BOOST_TEST_MESSAGE("tuned in " << took << " s: default " << t.default_ms << " ms, tuned " << t.tuned_ms << " ms, "
                                 << t.trials << " candidates, " << t.rejected << " rejected, schedule '" << t.schedule
                                 << "'");
  BOOST_TEST(t.trials > 0);
  BOOST_TEST(t.rejected == 0);
  BOOST_TEST(t.default_ms > 0);
  BOOST_TEST(t.tuned_ms <= t.default_ms);
  BOOST_TEST(took < 20 + 30);

  TuneResult written = t;
  if (written.schedule.empty()) written.schedule = "gpu.row.threads 128\n";
  TempDir dir("kiln-test-tune-cuda");
  std::ofstream(dir.path / (r.key + ".schedule")) << tuned_schedule_text(written, cuda_context(0).name);
  ScopedEnv schedules("KILN_SCHEDULE_DIR", dir.path.c_str());
  auto g = compile(fn, {.backend = "halide"});
  Tensor want = fn(cpu_x);
  check_close(g(x), host_values(want), want.shape(), "with the tuned schedule");
}

// The row schedule's structural directives on GPT-2 small's last residual add and layer_norm
// ([8, 1024, 768]) stay inside their outputs and compute kiln's values: a warp or a block per row
// by length, a block per row always, rows staged in shared memory or not, kept in registers or
// not. A block row staged without registers read 256 elements past its inputs' end until
// 2026-12-06 (CUDA error 700 on an H100; schedules/gpu_bounds_check.h now finds such an access
// at compile time, and tests/schedules/test_gpu_bounds_check.cpp runs these combinations
// without a GPU).
namespace {

// The one region of layer_norm(a + c) on [8, 1024, 768], recorded on the GPU.
RecordedRegion residual_layer_norm() {
  manual_seed(6);
  Tensor x = randn({8, 1024, 768}).to(kCuda), y = randn({8, 1024, 768}).to(kCuda);
  Tensor w = randn({768}).to(kCuda), b = randn({768}).to(kCuda);
  auto fn = [](Tensor a, Tensor c, Tensor weight, Tensor bias) { return layer_norm(a + c, {768}, weight, bias); };
  auto f = compile(fn, {.backend = "halide"});
  NoGradGuard no_grad;
  f(x, y, w, b);
  RegionRecorder recorder;
  f(x, y, w, b);
  BOOST_TEST_REQUIRE(recorder.regions().size() == 1u);
  return recorder.regions()[0];
}

std::string row_schedule(const char* warp, const char* stage, const char* registers) {
  return std::string("gpu.row.warp ") + warp + "\ngpu.row.stage " + stage + "\ngpu.row.registers " + registers + "\n";
}

}  // namespace

BOOST_AUTO_TEST_CASE(row_schedule_directives_combine_on_a_real_size_layer_norm, *needs_cuda()) {
  RecordedRegion r = residual_layer_norm();
  std::vector<std::string> schedules;
  for (const char* stage : {"0", "1"})
    for (const char* registers : {"0", "1"}) schedules.push_back(row_schedule("-1", stage, registers));
  for (const char* stage : {"0", "1"})
    for (const char* registers : {"0", "1"}) schedules.push_back(row_schedule("0", stage, registers));
  for (const std::string& schedule : schedules) {
    BOOST_TEST_MESSAGE("schedule: " << schedule);
    BOOST_TEST(check_region_schedule(r, schedule) == "", schedule);
  }
}
