// The region tuner (schedules/region_tuner.h): a recorder sees each distinct CPU region a compiled
// call runs, once per signature with its call count and a copy of its inputs; tuning one times
// candidates within its budget, keeps kiln's schedule unless another is faster by more than the
// noise, and what it writes is a region schedule that compiles and computes the same values.
#include <chrono>
#include <filesystem>
#include <fstream>

#include "schedules/region_schedule.h"
#include "schedules/region_tuner.h"
#include "support/reference.h"
#include "support/scoped_env.h"

using namespace kiln;
using namespace kiln::test;

namespace {

// Two softmaxes and a column sum.
TensorList program(const Tensor& x, const Tensor& y) {
  return {softmax(x * 2.0, -1), softmax(y * 2.0, -1), (x * y).sum({0})};
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_recorder_sees_each_region_once_with_its_inputs) {
  manual_seed(8);
  Tensor x = randn({256, 384}), y = randn({256, 384});
  auto f = compile([](Tensor a, Tensor b) { return program(a, b); }, {.backend = "halide"});
  NoGradGuard no_grad;
  f(x, y);
  std::vector<RecordedRegion> regions;
  {
    RegionRecorder recorder;
    f(x, y);
    f(x, y);  // the same regions again: counted, not recorded twice
    regions = recorder.regions();
  }
  BOOST_TEST_REQUIRE(!regions.empty());
  for (const RecordedRegion& r : regions) {
    BOOST_TEST(r.calls == 2, r.what);
    BOOST_TEST(r.key.size() == 16u);
    BOOST_TEST(r.what.find("a pipeline of") == 0u, r.what);
    BOOST_TEST(r.inputs.size() == r.region.inputs.size());
    BOOST_TEST(r.output_shapes.size() == r.region.outputs.size());
    for (const Tensor& in : r.inputs) {
      BOOST_TEST(in.storage() != x.storage());  // copies, in the same layout
      BOOST_TEST((in.shape() == x.shape() ? same_bits(in, x) || same_bits(in, y) : true));
    }
  }
}

BOOST_AUTO_TEST_CASE(a_tuned_region_schedule_computes_the_same_values) {
  manual_seed(9);
  Tensor x = randn({512, 1000});
  auto fn = [](Tensor a) { return softmax(a, -1) * 3.0; };
  auto f = compile(fn, {.backend = "halide"});
  NoGradGuard no_grad;
  f(x);
  RegionRecorder recorder;
  f(x);
  BOOST_TEST_REQUIRE(recorder.regions().size() == 1u);
  const RecordedRegion& r = recorder.regions()[0];
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::string> lines;
  TuneResult t = tune_region(r, {.budget_s = 8}, [&](const std::string& l) { lines.push_back(l); });
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  BOOST_TEST_MESSAGE("tuned in " << took << " s: default " << t.default_ms << " ms, tuned " << t.tuned_ms << " ms, "
                                 << t.trials << " candidates, schedule '" << t.schedule << "'");
  BOOST_TEST(t.trials > 0);
  BOOST_TEST(int(lines.size()) >= t.trials);
  BOOST_TEST(t.default_ms > 0);
  BOOST_TEST(t.tuned_ms <= t.default_ms);
  BOOST_TEST(took < 8 + 30);  // the budget, and the candidate that was compiling when it ran out
  BOOST_TEST(t.key == r.key);

  // Whatever the search found (here the serial schedule, the slowest candidate, to be sure the
  // file changes something), written as a schedule file it compiles and computes the softmax.
  std::string text = t.schedule.empty() ? "cpu.parallel 0\n" : t.schedule;
  TuneResult written = t;
  written.schedule = text;
  std::string file_text = tuned_schedule_text(written, "this machine");
  BOOST_TEST(file_text.find("# kiln tune: a pipeline of") == 0u, file_text);
  BOOST_TEST(parse_region_schedule(file_text, "t.schedule").directives.size() >= 1u);
  TempDir dir("kiln-test-tuner");
  std::ofstream(dir.path / (r.key + ".schedule")) << file_text;
  ScopedEnv schedules("KILN_SCHEDULE_DIR", dir.path.c_str());
  auto g = compile(fn, {.backend = "halide"});
  Tensor want = fn(x);
  check_close(g(x), host_values(want), want.shape(), "with the tuned schedule");
}

// Halide 14 wrote past a [1536] column sum split into tasks of 1024 and vectorized by 64
// (cpu.vector.scale 4 on AVX-512: transformer_block's qkv bias gradient); the task split now divides
// the extent. Every vector width on column sums of awkward lengths stays inside its outputs.
BOOST_AUTO_TEST_CASE(wide_vectors_on_column_sums_stay_inside_their_outputs) {
  manual_seed(10);
  for (int64_t n : {1536, 1000, 2560, 96}) {
    Tensor x = randn({64, n}), y = randn({64, n});
    auto f = compile([](Tensor a, Tensor b) { return (a * b).sum({0}); }, {.backend = "halide"});
    NoGradGuard no_grad;
    f(x, y);
    RegionRecorder recorder;
    f(x, y);
    BOOST_TEST_REQUIRE(recorder.regions().size() == 1u);
    for (int scale : {1, 2, 4}) {
      std::string schedule = "cpu.vector.scale " + std::to_string(scale) + "\n";
      BOOST_TEST(check_region_schedule(recorder.regions()[0], schedule) == "", "[" << n << "], " << schedule);
    }
  }
}

