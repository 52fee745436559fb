// The "halide" backend: a graph becomes a sequence of steps (schedules/fusion.h), each either a
// region of lowerable nodes compiled into one Halide pipeline, or one node that runs through its
// eager kernel (matmul, random draws, gathers whose indices are checked on the host); a value
// crosses between steps as a tensor. With the disk cache on (the default), a graph's pipelines are
// compiled to objects, linked into one shared library in the cache and loaded from there, so a
// later process skips lowering and LLVM (region_library.h); with KILN_CACHE=0 they are
// JIT-compiled in process. Each region is built by region_build.h. This file plans the steps and
// drives the build; the steps then run in schedules/graph_executor.cpp.
#include <algorithm>
#include <chrono>
#include <map>

#include "dsl/error.h"
#include "dsl/profiler.h"
#include "graph/backend.h"
#include "graph/logs.h"
#include "schedules/autoschedulers.h"
#include "schedules/disk_cache.h"
#include "schedules/fusion.h"
#include "schedules/gemm_layout.h"
#include "schedules/graph_executor.h"
#include "schedules/in_place.h"
#include "schedules/kept_outputs.h"
#include "schedules/jit_target.h"
#include "schedules/object_export.h"
#include "schedules/pipeline_memory.h"
#include "schedules/plan_file.h"
#include "schedules/region_build.h"
#include "schedules/region_library.h"
#include "schedules/weight_packing.h"

namespace kiln {

namespace {

// A tensor as a Halide buffer over the same host memory (the JIT path).
Halide::Buffer<> as_buffer(const Tensor& t) {
  std::vector<halide_dimension_t> dims = halide_dims(t);
  return Halide::Buffer<>(halide_type(t.dtype()), t.data_ptr(), int(dims.size()), dims.data());
}

bool on_cuda(const Graph& g, const std::vector<int>& values) {
  return std::any_of(values.begin(), values.end(), [&](int v) { return g.values[size_t(v)].meta.device.is_cuda(); });
}

// Runs a JIT-compiled region (KILN_CACHE=0) on host tensors: inputs, then outputs.
JitRegion jit_runner(const RegionStep& s) {
  return [region = s.region, lowered = s.lowered, pipeline = s.pipeline](const std::vector<Tensor>& tensors,
                                                                          const std::vector<int32_t>& sizes) {
    std::vector<Halide::Buffer<>> buffers;
    for (const Tensor& t : tensors) buffers.push_back(as_buffer(t));
    size_t n_in = region.inputs.size();
    Halide::ParamMap params;
    for (size_t k = 0; k < n_in; ++k) params.set(lowered.inputs[k], buffers[k]);
    for (size_t k = 0; k < sizes.size(); ++k) params.set(lowered.symbols.at(region.symbols[k]), sizes[k]);
    std::vector<Halide::Buffer<>> outs(buffers.begin() + long(n_in), buffers.end());
    Halide::Realization real(outs);
    Halide::Pipeline p = pipeline;  // a handle: realize() is not const
    try {
      p.realize(real, jit_target(), params);
    } catch (const Halide::Error& e) {
      throw_error("halide backend: ", region_what(region), " failed: ", e.what());
    }
  };
}

// The executor of the compiled steps (graph_executor.h). With KILN_DEBUG_DIR set, the plan of a
// graph compiled through the disk cache goes there as text too (<label>.plan.txt, plan_file.h);
// an open ObjectExport records it.
std::shared_ptr<CompiledGraph> executor(std::shared_ptr<const Graph> g, const std::vector<RegionStep>& steps,
                                        std::shared_ptr<SharedLibrary> library, std::map<int, std::vector<int>> in_place,
                                        std::map<int, int> over, const std::string& label) {
  ExecutorPlan plan{std::move(g), std::vector<ExecutorStep>(steps.begin(), steps.end()), std::move(in_place),
                    std::move(over), std::move(library)};
  if (plan.code && !debug_dir().empty()) debug_dump(label + ".plan", "txt", write_plan(plan));
  if (ObjectExport* exporting = ObjectExport::current()) exporting->finish_graph(plan);
  return make_graph_executor(std::move(plan));
}

class HalideBackend final : public Backend {
 public:
  std::string_view name() const override { return "halide"; }
  bool fuses_ops() const override { return true; }
  // CPU GEMM steps' transposed operands copied dense where they are made (gemm_layout.h).
  std::vector<GraphRewrite> graph_rewrites() const override { return {{"dense GEMM operands", dense_gemm_operands}}; }

  void check(const BackendOptions& options) const override {
    auto names = halide_autoscheduler_names();
    KILN_CHECK(options.scheduler == "kiln" || std::find(names.begin(), names.end(), options.scheduler) != names.end(),
               "compile: unknown scheduler '", options.scheduler, "' (kiln, mullapudi2016, adams2019, li2018)");
  }

  std::shared_ptr<CompiledGraph> compile(std::shared_ptr<const Graph> g, const BackendOptions& options) override {
    std::vector<RegionStep> steps;
    std::vector<PlannedStep> plan;
    {
      CompilePhase phase("fusion plan");
      plan = plan_fusion(*g);
    }
    std::map<int, std::vector<int>> in_place = in_place_outputs(*g, plan);
    std::map<int, int> over = reused_intermediates(*g, plan, in_place);
    for (PlannedStep& p : plan)
      for (int v : p.region.outputs)
        if (in_place.count(v) || over.count(v)) p.region.in_place.push_back(v);
    std::string fusion = fusion_text(*g, plan);
    for (const std::string& r : options.rewrites) fusion += r + "\n";
    if (!in_place.empty()) fusion += std::to_string(in_place.size()) + " written outputs computed in place\n";
    for (const auto& [v, x] : over)
      fusion += "%" + std::to_string(v) + " is computed over %" + std::to_string(x) + " (its last read)\n";
    int region_index = 0;
    for (const PlannedStep& p : plan) {
      if (p.node >= 0) continue;
      if (keeps_outputs(*g, p.region, in_place, over))
        fusion += "region " + std::to_string(region_index) +
                  " reads parameters only: its outputs are kept between calls while they are unchanged\n";
      ++region_index;
    }
    log_line(LogChannel::fusion, options.label + ":\n" + fusion);
    debug_dump(options.label + ".fusion", "txt", fusion);
    for (PlannedStep& p : plan) {
      RegionStep& s = steps.emplace_back();
      s.node = p.node;
      s.region = std::move(p.region);
      s.cuda = p.node < 0 && (on_cuda(*g, s.region.inputs) || on_cuda(*g, s.region.outputs));
      if (p.node < 0) s.own_schedule = region_schedule_of(*g, s.region, s.cuda);
      if (p.node >= 0 && packs_weight(*g, g->nodes[size_t(p.node)]))
        s.packed_b = std::make_shared<PackedWeight>(PackedWeight::Layout::dense);
      s.packers = region_packers(s.region);
    }

    std::shared_ptr<SharedLibrary> library;
    bool any_region = std::any_of(steps.begin(), steps.end(), [](const RegionStep& s) { return s.node < 0; });
    ObjectExport* exporting = ObjectExport::current();
    std::string prefix = exporting ? exporting->begin_graph(options.label) : "kiln";
    if ((disk_cache_enabled() || exporting) && any_region) {
      try {
        library = load_or_build(*g, fusion, steps, options, prefix);
      } catch (const Error& e) {  // a cached library that does not load: rebuild it once
        if (exporting) throw;
        log_line(LogChannel::output_code, std::string("halide: ") + e.what() + "; rebuilding");
        remove_cache_entry(graph_key(*g, fusion, steps, options), ".so");
        library = load_or_build(*g, fusion, steps, options, prefix);
      }
      return executor(std::move(g), steps, std::move(library), std::move(in_place), std::move(over), options.label);
    }
    KILN_CHECK(!any_region || !g->on_cuda(), "halide backend: CUDA graphs are compiled through the disk cache, which "
               "KILN_CACHE=0 turns off (point KILN_CACHE_DIR at a scratch folder instead)");
    std::vector<RegionStep*> all = region_steps(steps);
    std::vector<int> first = same_pipelines(*g, all);
    int index = 0;
    for (size_t i = 0; i < all.size(); ++i) {
      RegionStep& s = *all[i];
      if (first[i] != int(i)) {  // the same pipeline as an earlier region: its handles
        s.lowered = all[size_t(first[i])]->lowered;
        s.pipeline = all[size_t(first[i])]->pipeline;
        continue;
      }
      build_region(*g, s, options, index++);
      s.pipeline.jit_handlers().custom_malloc = [](Halide::JITUserContext* c, size_t n) { return pipeline_malloc(c, n); };
      s.pipeline.jit_handlers().custom_free = [](Halide::JITUserContext* c, void* p) { pipeline_free(c, p); };
      auto t0 = std::chrono::steady_clock::now();
      {
        CompilePhase phase("code generation");
        s.pipeline.compile_jit(jit_target());
      }
      log_line(LogChannel::output_code, "halide: " + region_what(s.region) + ", " + std::to_string(s.region.outputs.size()) +
                                            " outputs, jit " + std::to_string(int(ms_since(t0))) + " ms");
    }
    for (RegionStep* s : all) s->jit = jit_runner(*s);
    return executor(std::move(g), steps, nullptr, std::move(in_place), std::move(over), options.label);
  }
};

}  // namespace

}  // namespace kiln

// Referenced by the kiln target's link options, so the linker keeps this file and registers the
// backend before main().
extern "C" {
int kiln_halide_backend_registered = [] {
  kiln::register_backend(std::make_shared<kiln::HalideBackend>());
  return 1;
}();
}
