// The "halide" backend: a graph becomes a sequence of steps (schedules/fusion.h), each either a
// region of lowerable nodes compiled into one Halide pipeline, or one node that runs through its
// eager kernel (matmul, random draws, gathers whose indices are checked on the host); a value
// crosses between steps as a tensor. With the disk cache on (the default), a graph's pipelines are
// compiled to objects, linked into one shared library in the cache and loaded from there, so a
// later process skips lowering and LLVM; with KILN_CACHE=0 they are JIT-compiled in process. This
// file compiles; the steps then run in schedules/graph_executor.cpp.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <thread>
#include <sstream>
#include <unistd.h>

#include "dsl/error.h"
#include "dsl/profiler.h"
#include "graph/backend.h"
#include "graph/logs.h"
#include "schedules/autoschedulers.h"
#include "schedules/cpu_schedule.h"
#include "schedules/disk_cache.h"
#include "schedules/fusion.h"
#include "schedules/gemm_layout.h"
#include "schedules/gpu_launch_check.h"
#include "schedules/gpu_math.h"
#include "schedules/in_place.h"
#include "schedules/gpu_schedule.h"
#include "schedules/graph_executor.h"
#include "schedules/jit_target.h"
#include "schedules/lower_region.h"
#include "schedules/object_export.h"
#include "schedules/pipeline_memory.h"
#include "schedules/plan_file.h"
#include "schedules/region_signature.h"
#include "schedules/schedule_source.h"
#include "schedules/shared_library.h"
#include "schedules/size_specialization.h"
#include "schedules/weight_packing.h"
#include "dsl/settings.h"

namespace kiln {

namespace {

// A step as the executor runs it, with what compiling its region takes.
struct Step : ExecutorStep {
  bool cuda = false;  // the region's values live on the GPU: CUDA target, GPU schedule
  LoweredRegion lowered;
  Halide::Pipeline pipeline;
  std::vector<std::string> specialized;  // specialize() branches added (size_specialization.h)
};

// A tensor as a Halide buffer over the same host memory (the JIT path).
Halide::Buffer<> as_buffer(const Tensor& t) {
  std::vector<halide_dimension_t> dims = halide_dims(t);
  return Halide::Buffer<>(halide_type(t.dtype()), t.data_ptr(), int(dims.size()), dims.data());
}

bool on_cuda(const Graph& g, const std::vector<int>& values) {
  return std::any_of(values.begin(), values.end(), [&](int v) { return g.values[size_t(v)].meta.device.is_cuda(); });
}

// Runs a JIT-compiled region (KILN_CACHE=0) on host tensors: inputs, then outputs.
JitRegion jit_runner(const Step& s) {
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
std::shared_ptr<CompiledGraph> executor(std::shared_ptr<const Graph> g, const std::vector<Step>& steps,
                                        std::shared_ptr<SharedLibrary> library, std::map<int, std::vector<int>> in_place,
                                        std::map<int, int> over, const std::string& label) {
  ExecutorPlan plan{std::move(g), std::vector<ExecutorStep>(steps.begin(), steps.end()), std::move(in_place),
                    std::move(over), std::move(library)};
  if (plan.code && !debug_dir().empty()) debug_dump(label + ".plan", "txt", write_plan(plan));
  if (ObjectExport* exporting = ObjectExport::current()) exporting->finish_graph(plan);
  return make_graph_executor(std::move(plan));
}

// Runs a compiled pipeline once on zero-filled buffers of the traced sizes. Halide's
// autoschedulers can split an output by more than its extent, which fails only at run time.
void trial_run(const Graph& g, Step& s) {
  Halide::ParamMap params;
  std::vector<Halide::Buffer<>> keep;
  auto buffer = [&](int v, const Shape& shape) {
    std::vector<int> extents(shape.rbegin(), shape.rend());
    Halide::Buffer<> b(halide_type(g.values[size_t(v)].meta.dtype), extents);
    std::memset(b.data(), 0, b.size_in_bytes());
    return b;
  };
  for (size_t k = 0; k < s.region.inputs.size(); ++k) {
    keep.push_back(buffer(s.region.inputs[k], region_input_shape(g, s.region, k)));
    params.set(s.lowered.inputs[k], keep.back());
  }
  for (const auto& [sym, p] : s.lowered.symbols) params.set(p, int32_t(g.shape_env->symbol(sym).hint));
  std::vector<Halide::Buffer<>> outs;
  for (int v : s.region.outputs) outs.push_back(buffer(v, g.values[size_t(v)].meta.shape));
  Halide::Realization real(outs);
  s.pipeline.realize(real, jit_target(), params);
}

// kiln's schedule, or one of Halide's autoschedulers (kiln's schedule when it fails).
void schedule(const Graph& g, Step& s, const std::string& scheduler) {
  if (s.cuda) {  // Halide 14's one GPU autoscheduler (li2018) is slow and weak: kiln's own schedule
    if (scheduler != "kiln")
      log_line(LogChannel::schedule, "halide: " + scheduler + " schedules CPU code only; kiln's GPU schedule runs");
    schedule_gpu(g, s.region, s.lowered);
    return;
  }
  if (scheduler != "kiln") {
    try {
      std::string source = apply_halide_autoscheduler(scheduler, g, s.region, s.lowered, s.pipeline);
      s.pipeline.compile_jit(jit_target());
      trial_run(g, s);
      log_line(LogChannel::schedule, "halide: " + scheduler + " schedule:\n" + source);
      return;
    } catch (const std::exception& e) {
      log_line(LogChannel::schedule, "halide: " + scheduler + " failed (" + e.what() + "); using kiln's schedule");
      s.lowered = lower_region(g, s.region);  // a fresh pipeline: the failed attempt may have left marks
      s.pipeline = Halide::Pipeline(s.lowered.outputs);
    }
  }
  schedule_cpu(g, s.region, s.lowered);
}

// With KILN_DEBUG_DIR set: each pipeline's lowered statement as text and HTML, and its assembly.
void dump_region(const Step& s, const std::string& name) {
  std::string dir = debug_dir();
  if (dir.empty()) return;
  std::filesystem::create_directories(dir);
  std::string base = dir + "/" + name;
  Halide::Pipeline p = s.pipeline;
  p.compile_to({{Halide::OutputFileType::stmt, base + ".stmt"},
                {Halide::OutputFileType::stmt_html, base + ".stmt.html"},
                {Halide::OutputFileType::assembly, base + ".s"}},
               pipeline_arguments(s.region, s.lowered), name, aot_target(s.cuda));
}

// Lowers and schedules one region into s.pipeline, with a specialize() branch for each of
// `conditions` on its sizes (CPU regions).
void build_region(const Graph& g, Step& s, const BackendOptions& options, int index,
                  const std::vector<SizeCondition>& conditions = {}) {
  {
    CompilePhase phase("lowering", "\"region\": " + json_quote(region_what(s.region)));
    s.lowered = lower_region(g, s.region);
    s.pipeline = s.cuda ? cuda_pipeline(s.lowered.outputs) : Halide::Pipeline(s.lowered.outputs);
  }
  {
    CompilePhase phase("scheduling", "\"region\": " + json_quote(region_what(s.region)));
    schedule(g, s, options.scheduler);
    if (!s.cuda) s.specialized = specialize_sizes(g, s.lowered, conditions);
  }
  std::string name = options.label + ".region_" + std::to_string(index);
  for (const std::string& c : s.specialized)
    log_line(LogChannel::schedule, name + ": a specialize() branch for " + c);
  if (log_enabled(LogChannel::schedule) || !debug_dir().empty()) {
    std::string source = "// " + name + " (" + options.scheduler + " schedule)\n" + schedule_source(s.lowered.outputs);
    log_line(LogChannel::schedule, source);
    debug_dump(name + ".schedule", "cpp", source);
  }
  dump_region(s, name);
}

// A CUDA kernel that runs a large loop on few threads is a schedule bug worth knowing about at
// any log level (gpu_launch_check.h).
void warn_narrow_launches(const std::vector<GpuLaunch>& launches, const Step& s, const std::string& what) {
  for (const std::string& w : narrow_gpu_launches(launches))
    std::cerr << "kiln: warning: " << what << " (" << region_what(s.region) << "): a GPU loop runs on few threads: " << w
              << "\n";
}

// "kiln_region_3": a region's function in a graph's library; an export names its graphs apart.
std::string function_name(const std::string& prefix, int region) { return prefix + "_region_" + std::to_string(region); }

// Threads that compile a graph's regions: KILN_COMPILE_THREADS, else one per core.
size_t compile_threads() {
  static const size_t n = [] {
    int64_t cores = std::max(1, int(std::thread::hardware_concurrency()));
    return size_t(int_setting("KILN_COMPILE_THREADS", cores, 1, 1024));
  }();
  return n;
}

// The cache key: everything the generated code depends on besides kiln's and Halide's versions
// (which cache_key adds): the graph with its layouts and size hints, the fusion plan (its regions,
// and which outputs overwrite which tensors), the scheduler, the target.
std::string graph_key(const Graph& g, const std::string& plan, const BackendOptions& options) {
  std::ostringstream os;
  os << g.text() << "\nplan\n" << plan << "\nhash " << g.structural_hash() << "\nlayouts";
  for (const Value& v : g.values) {
    os << " [" << to_string(v.meta.shape) << ":";
    for (int64_t st : v.strides) os << st << ',';
    os << '@' << v.offset << ']';
  }
  os << "\nwrites";  // outputs computed in place are read back, not recomputed (in_place.h)
  for (const auto& [output, input] : g.writes) os << ' ' << output << "->" << input;
  bool cuda = g.on_cuda();
  return cache_key({os.str(), options.scheduler, aot_target(cuda).to_string(), cuda ? gpu_schedule_tuning() : ""});
}

// The region steps, in order.
std::vector<Step*> region_steps(std::vector<Step>& steps) {
  std::vector<Step*> out;
  for (Step& s : steps)
    if (s.node < 0) out.push_back(&s);
  return out;
}

// For each region step, the first one that lowers to the same pipeline (region_signature.h).
std::vector<int> same_pipelines(const Graph& g, const std::vector<Step*>& regions) {
  std::vector<const Region*> rs;
  for (const Step* s : regions) rs.push_back(&s->region);
  return first_with_same_signature(g, rs);
}

// Compiles the regions into one shared library in the disk cache (unless it is there already),
// one function per distinct pipeline named after `prefix`, and points each region step at its
// function. Under an ObjectExport, the cache is left alone: the library is built and loaded from
// a scratch folder, and its objects go to the export.
std::shared_ptr<SharedLibrary> load_or_build(const Graph& g, const std::string& plan, std::vector<Step>& steps,
                                             const BackendOptions& options, const std::string& prefix) {
  auto t0 = std::chrono::steady_clock::now();
  ObjectExport* exporting = ObjectExport::current();
  std::string key = graph_key(g, plan, options);
  std::string path = exporting ? std::string() : find_cache_entry(key, ".so");
  bool hit = !path.empty();
  std::vector<Step*> all = region_steps(steps);
  std::vector<int> first = same_pipelines(g, all);
  std::shared_ptr<SharedLibrary> library;
  if (!hit) {
    static std::atomic<int> counter{0};
    auto dir = std::filesystem::temp_directory_path() /
               ("kiln-build-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::create_directories(dir);
    std::vector<Step*> regions;  // one per signature: the others call its function
    for (size_t i = 0; i < all.size(); ++i)
      if (first[i] == int(i)) regions.push_back(all[i]);
    std::vector<std::vector<std::string>> objects(regions.size());  // each region's (several targets: several)
    // Regions compile side by side (separate Halide pipelines; kiln's scheduler only: Halide's
    // autoschedulers are plugins with state of their own).
    std::atomic<size_t> next{0};
    std::mutex error_mu;
    std::exception_ptr error;
    PhaseSeconds* phases = CompilePhaseSink::current();  // the workers' phases count for this compile
    auto compile_some = [&] {
      CompilePhaseSink sink(phases);
      for (size_t i; (i = next++) < regions.size();) {
        try {
          Step& s = *regions[i];
          auto r0 = std::chrono::steady_clock::now();
          build_region(g, s, options, int(i), exporting ? exporting->conditions() : std::vector<SizeCondition>{});
          std::string object = (dir / (function_name(prefix, int(i)) + ".o")).string();
          std::shared_ptr<const std::vector<GpuLaunch>> launches;
          if (s.cuda) launches = record_gpu_launches(s.pipeline, region_sizes(g, s.region, s.lowered));
          {
            CompilePhase phase("code generation", "\"region\": " + json_quote(region_what(s.region)));
            std::vector<Halide::Argument> args = pipeline_arguments(s.region, s.lowered);
            if (exporting && !exporting->cpu_targets().empty() && !s.cuda) {
              objects[i] = compile_region_objects(s.pipeline, args, function_name(prefix, int(i)), object,
                                                  exporting->cpu_targets());
            } else {
              compile_region_object(s.pipeline, args, function_name(prefix, int(i)), object, s.cuda);
              objects[i] = {object};
            }
          }
          if (launches) warn_narrow_launches(*launches, s, options.label + " region " + std::to_string(i));
          log_line(LogChannel::output_code, "halide: " + options.label + " region " + std::to_string(i) + ": " +
                                                region_what(s.region) + ", " + std::to_string(s.region.outputs.size()) +
                                                " outputs, compiled in " + std::to_string(int(ms_since(r0))) + " ms");
        } catch (...) {
          std::lock_guard<std::mutex> lock(error_mu);
          if (!error) error = std::current_exception();
        }
      }
    };
    size_t workers = options.scheduler == "kiln" ? std::min<size_t>(regions.size(), compile_threads()) : 1;
    std::vector<std::thread> pool;
    for (size_t w = 1; w < workers; ++w) pool.emplace_back(compile_some);
    compile_some();
    for (std::thread& t : pool) t.join();
    if (error) {
      std::filesystem::remove_all(dir);
      std::rethrow_exception(error);
    }
    std::vector<std::string> all_objects;
    for (const std::vector<std::string>& o : objects) all_objects.insert(all_objects.end(), o.begin(), o.end());
    {
      CompilePhase phase("link");
      link_shared_library(all_objects, (dir / "graph.so").string());
    }
    if (exporting) {
      for (size_t i = 0; i < regions.size(); ++i)
        for (const std::string& c : regions[i]->specialized)
          exporting->note_specialized("region " + std::to_string(i) + ": " + c);
      exporting->add_objects(all_objects);
      library = std::make_shared<SharedLibrary>((dir / "graph.so").string());  // stays mapped once removed
      path = exporting->dir();
    } else {
      path = store_cache_entry(key, ".so", (dir / "graph.so").string());
    }
    std::filesystem::remove_all(dir);
  } else if (!debug_dir().empty()) {
    int index = 0;
    for (size_t i = 0; i < all.size(); ++i)
      if (first[i] == int(i)) build_region(g, *all[i], options, index++);
  }
  if (!library) {
    CompilePhase phase(hit ? "disk cache load" : "load");
    library = std::make_shared<SharedLibrary>(path);
  }
  std::vector<int> function_of(all.size());  // the function index of each region: its signature's
  int distinct = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    function_of[i] = first[i] == int(i) ? distinct++ : function_of[size_t(first[i])];
    all[i]->function_name = function_name(prefix, function_of[i]);
    all[i]->function = library->function(all[i]->function_name);
  }
  log_line(LogChannel::output_code, "halide: " + std::to_string(all.size()) + " regions, " + std::to_string(distinct) +
                                        " distinct pipelines " + (hit ? "loaded from the disk cache: " : "compiled into ") +
                                        path + " in " + std::to_string(int(ms_since(t0))) + " ms");
  return library;
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
    std::vector<Step> steps;
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
    log_line(LogChannel::fusion, options.label + ":\n" + fusion);
    debug_dump(options.label + ".fusion", "txt", fusion);
    for (PlannedStep& p : plan) {
      Step& s = steps.emplace_back();
      s.node = p.node;
      s.region = std::move(p.region);
      s.cuda = p.node < 0 && (on_cuda(*g, s.region.inputs) || on_cuda(*g, s.region.outputs));
      if (p.node >= 0 && packs_weight(*g, g->nodes[size_t(p.node)]))
        s.packed_b = std::make_shared<PackedWeight>(PackedWeight::Layout::dense);
      s.packers = region_packers(s.region);
    }

    std::shared_ptr<SharedLibrary> library;
    bool any_region = std::any_of(steps.begin(), steps.end(), [](const Step& s) { return s.node < 0; });
    ObjectExport* exporting = ObjectExport::current();
    std::string prefix = exporting ? exporting->begin_graph(options.label) : "kiln";
    if ((disk_cache_enabled() || exporting) && any_region) {
      try {
        library = load_or_build(*g, fusion, steps, options, prefix);
      } catch (const Error& e) {  // a cached library that does not load: rebuild it once
        if (exporting) throw;
        log_line(LogChannel::output_code, std::string("halide: ") + e.what() + "; rebuilding");
        remove_cache_entry(graph_key(*g, fusion, options), ".so");
        library = load_or_build(*g, fusion, steps, options, prefix);
      }
      return executor(std::move(g), steps, std::move(library), std::move(in_place), std::move(over), options.label);
    }
    KILN_CHECK(!any_region || !g->on_cuda(), "halide backend: CUDA graphs are compiled through the disk cache, which "
               "KILN_CACHE=0 turns off (point KILN_CACHE_DIR at a scratch folder instead)");
    std::vector<Step*> all = region_steps(steps);
    std::vector<int> first = same_pipelines(*g, all);
    int index = 0;
    for (size_t i = 0; i < all.size(); ++i) {
      Step& s = *all[i];
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
    for (Step* s : all) s->jit = jit_runner(*s);
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
