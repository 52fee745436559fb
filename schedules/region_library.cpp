#include "schedules/region_library.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <sstream>
#include <thread>
#include <unistd.h>

#include "dsl/halide_def.h"
#include "dsl/profiler.h"
#include "dsl/settings.h"
#include "graph/logs.h"
#include "schedules/disk_cache.h"
#include "schedules/gpu_bounds_check.h"
#include "schedules/gpu_launch_check.h"
#include "schedules/gpu_schedule.h"
#include "schedules/jit_target.h"
#include "schedules/object_export.h"
#include "schedules/op_definition_text.h"
#include "schedules/region_schedule.h"

namespace kiln {

namespace {

// A CUDA kernel that runs a large loop on few threads is a schedule bug worth knowing about at
// any log level (gpu_launch_check.h).
void warn_narrow_launches(const std::vector<GpuLaunch>& launches, const RegionStep& s, const std::string& what) {
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

}  // namespace

// Everything the generated code depends on besides kiln's and Halide's versions (which cache_key
// adds): the graph with its layouts and size hints, the fusion plan (its regions, and which outputs
// overwrite which tensors), the scheduler, the target.
std::string graph_key(const Graph& g, const std::string& plan, const std::vector<RegionStep>& steps,
                      const BackendOptions& options) {
  std::ostringstream os;
  os << g.text() << "\nplan\n" << plan << "\nhash " << g.structural_hash() << "\nlayouts";
  for (const Value& v : g.values) {
    os << " [" << to_string(v.meta.shape) << ":";
    for (int64_t st : v.strides) os << st << ',';
    os << '@' << v.offset << ']';
  }
  os << "\ndefinitions";
  for (const GraphNode& n : g.nodes)
    if (n.op->custom && (n.op->pointwise || n.op->define)) os << "\n" << n.op->name << " " << op_definition_text(n, g);
  os << "\nwrites";  // outputs computed in place are read back, not recomputed (in_place.h)
  for (const auto& [output, input] : g.writes) os << ' ' << output << "->" << input;
  bool cuda = g.on_cuda();
  for (const RegionStep& s : steps)
    if (s.own_schedule) os << "\nschedule\n" << s.own_schedule->text;
  return cache_key({os.str(), options.scheduler, aot_target(cuda).to_string(), cuda ? gpu_schedule_tuning() : ""});
}

std::shared_ptr<SharedLibrary> load_or_build(const Graph& g, const std::string& plan, std::vector<RegionStep>& steps,
                                             const BackendOptions& options, const std::string& prefix) {
  auto t0 = std::chrono::steady_clock::now();
  ObjectExport* exporting = ObjectExport::current();
  std::string key = graph_key(g, plan, steps, options);
  std::string path = exporting ? std::string() : find_cache_entry(key, ".so");
  bool hit = !path.empty();
  std::vector<RegionStep*> all = region_steps(steps);
  std::vector<int> first = same_pipelines(g, all);
  std::shared_ptr<SharedLibrary> library;
  if (!hit) {
    static std::atomic<int> counter{0};
    auto dir = std::filesystem::temp_directory_path() /
               ("kiln-build-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::create_directories(dir);
    std::vector<RegionStep*> regions;  // one per signature: the others call its function
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
          RegionStep& s = *regions[i];
          auto r0 = std::chrono::steady_clock::now();
          build_region(g, s, options, int(i), exporting ? exporting->conditions() : std::vector<SizeCondition>{});
          std::string object = (dir / (function_name(prefix, int(i)) + ".o")).string();
          std::shared_ptr<const std::vector<GpuLaunch>> launches;
          std::shared_ptr<const GpuBounds> bounds;
          if (s.cuda) {
            std::map<std::string, int64_t> sizes = region_sizes(g, s.region, s.lowered);
            launches = record_gpu_launches(s.pipeline, sizes);
            bounds = record_gpu_bounds(s.pipeline, sizes);
          }
          {
            CompilePhase phase("code generation", "\"region\": " + json_quote(region_what(s.region)));
            std::vector<Halide::Argument> args = pipeline_arguments(s.region, s.lowered);
            std::vector<Halide::Target> targets = exporting ? exporting->targets_for(s.cuda) : std::vector<Halide::Target>{};
            if (!targets.empty()) {
              objects[i] = compile_region_objects(s.pipeline, args, function_name(prefix, int(i)), object, targets);
            } else {
              compile_region_object(s.pipeline, args, function_name(prefix, int(i)), object, s.cuda);
              objects[i] = {object};
            }
          }
          if (launches) warn_narrow_launches(*launches, s, options.label + " region " + std::to_string(i));
          // Run, such a kernel would read or write another allocation's memory, or end the
          // process's CUDA context (error 700).
          KILN_CHECK(!bounds || bounds->outside.empty(), "halide: ", options.label, " region ", i, " (",
                     region_what(s.region), "): its CUDA schedule accesses memory outside a buffer at the traced sizes: ",
                     bounds ? bounds->outside.front() : "", " (a schedule bug: with KILN_SCHEDULE_DIR or KILN_GPU_ROW_* ",
                     "settings, a directive there chose it)");
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


}  // namespace kiln
