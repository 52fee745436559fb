// schedules/gpu_bounds_check.h without a GPU: a CUDA pipeline whose guard Halide 14 drops (a row
// of 768 staged in steps of 4 x 256, the pattern of 2026-12-06's CUDA error 700) is found with
// the point that leaves its buffer; the same row split so that its guard tests the thread is
// not; and kiln's row schedule, in every combination of its structural tunables, keeps a
// residual layer norm and a softmax of odd length inside their buffers.
#include <boost/test/unit_test.hpp>

#include "graph/graph.h"
#include "schedules/fusion.h"
#include "schedules/gpu_bounds_check.h"
#include "schedules/gpu_launch_check.h"
#include "schedules/gpu_math.h"
#include "schedules/gpu_schedule.h"
#include "schedules/lower_region.h"
#include "schedules/shared_library.h"
#include "support/graph_builder.h"

using namespace kiln;
using kiln::test::Builder;
using namespace Halide;

namespace {

// out(x, row) = 2 * in(x, row) over rows of 768, a block a row, its row staged in shared memory
// by 256 threads of 4 consecutive elements: split as Halide 14 mishandles (by 1024 and then by
// 4, the guard on the vector) or with the lanes split first (the guard on the thread).
GpuBounds staged_row(bool guard_on_vector) {
  ImageParam in(Float(32), 2, "in");
  Var x("x"), row("row");
  Func out("out");
  out(x, row) = in(x, row) * 2.0f;
  out.bound(x, 0, 768).bound(row, 0, 4096);
  in.dim(0).set_bounds(0, 768).dim(1).set_bounds(0, 4096).set_stride(768);
  out.output_buffer().dim(0).set_bounds(0, 768).dim(1).set_bounds(0, 4096).set_stride(768);
  Var co("co"), ci("ci"), ct("ct"), cv("cv"), xo("xo"), t("t");
  out.split(x, xo, t, 256, TailStrategy::GuardWithIf).reorder(t, xo, row).gpu_blocks(row).gpu_threads(t);
  Func staged = in.in(out);
  staged.compute_at(out, row);
  if (guard_on_vector)
    staged.split(staged.args()[0], co, ci, 1024, TailStrategy::GuardWithIf)
        .split(ci, ct, cv, 4, TailStrategy::GuardWithIf)
        .vectorize(cv)
        .gpu_threads(ct);
  else
    staged.split(staged.args()[0], xo, cv, 4, TailStrategy::RoundUp)
        .split(xo, co, ct, 256, TailStrategy::GuardWithIf)
        .reorder(cv, ct, co)
        .vectorize(cv)
        .gpu_threads(ct);
  Pipeline p(out);
  std::map<std::string, int64_t> sizes;
  for (const char* b : {"in", "out"}) {
    std::string n = b;
    sizes[n + ".min.0"] = 0, sizes[n + ".extent.0"] = 768, sizes[n + ".stride.0"] = 1;
    sizes[n + ".min.1"] = 0, sizes[n + ".extent.1"] = 4096, sizes[n + ".stride.1"] = 768;
  }
  auto bounds = record_gpu_bounds(p, sizes);
  p.compile_to_module({in}, "staged_row", aot_target(true));
  return *bounds;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_dropped_guard_is_found_with_the_point_that_leaves_the_buffer) {
  GpuBounds bad = staged_row(true);
  BOOST_TEST_REQUIRE(!bad.outside.empty());
  BOOST_TEST_MESSAGE(bad.outside[0]);
  // The last row's loads run 256 elements past the 4096 x 768 input.
  BOOST_TEST(bad.outside[0].find("a load of in ") == 0u);
  BOOST_TEST(bad.outside[0].find("of 3145728") != std::string::npos);
  BOOST_TEST(bad.outside[0].find("= 4095") != std::string::npos);  // found at the last block

  GpuBounds good = staged_row(false);
  BOOST_TEST(good.outside.empty());
  BOOST_TEST(good.checked >= 3);  // the staged store, its load and in's load, at least
  BOOST_TEST(good.unbounded == 0);
}

namespace {

// Every region of g scheduled for CUDA with `tuning`: what its accesses may leave.
GpuBounds bounds_of(Graph g, const RowTuning& tuning) {
  GpuBounds all;
  for (PlannedStep& step : plan_fusion(g)) {
    if (step.node >= 0) continue;
    LoweredRegion lowered = lower_region(g, step.region);
    Pipeline p = cuda_pipeline(lowered.outputs);
    schedule_gpu(g, step.region, lowered, tuning);
    auto bounds = record_gpu_bounds(p, region_sizes(g, step.region, lowered));
    p.compile_to_module(pipeline_arguments(step.region, lowered), "kiln_region", aot_target(true));
    all.outside.insert(all.outside.end(), bounds->outside.begin(), bounds->outside.end());
    all.checked += bounds->checked;
    all.unbounded += bounds->unbounded;
  }
  return all;
}

}  // namespace

// GPT-2's residual add and layer norm ([8, 1024, 768]: 768 is not a multiple of 4 x 256), and a
// softmax over rows of 1001, under a warp or a block per row, rows staged in shared memory or
// not, kept in registers or not, written as vectors or not.
BOOST_AUTO_TEST_CASE(row_schedule_tunables_keep_every_access_inside_its_buffer) {
  Builder ln;
  int a = ln.input({8, 1024, 768}), c = ln.input({8, 1024, 768}), w = ln.input({768}), b = ln.input({768});
  ln.g.outputs = {ln.op("layer_norm", {ln.op("add", {a, c}), w, b},
                        {{"normalized_shape", std::vector<int64_t>{768}}, {"eps", 1e-5}})};
  Builder sm;
  sm.g.outputs = {sm.op("softmax", {sm.input({64, 1001})}, {{"dim", int64_t(-1)}})};
  for (int warp : {-1, 0, 1})
    for (bool stage : {false, true})
      for (bool registers : {false, true})
        for (bool vector : {false, true}) {
          RowTuning t = default_row_tuning();
          t.warp = warp, t.stage = stage, t.registers = registers, t.vector = vector;
          for (const Graph* g : {&ln.g, &sm.g}) {
            GpuBounds found = bounds_of(*g, t);
            BOOST_TEST_CONTEXT((g == &ln.g ? "layer_norm" : "softmax")
                               << " warp " << warp << " stage " << stage << " registers " << registers << " vector "
                               << vector) {
              for (const std::string& s : found.outside) BOOST_ERROR(s);
              BOOST_TEST(found.checked > 0);
            }
          }
        }
}
