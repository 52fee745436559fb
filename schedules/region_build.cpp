#include "schedules/region_build.h"

#include <cstring>
#include <filesystem>

#include "dsl/profiler.h"
#include "graph/logs.h"
#include "schedules/autoschedulers.h"
#include "schedules/cpu_schedule.h"
#include "schedules/gpu_math.h"
#include "schedules/gpu_schedule.h"
#include "schedules/jit_target.h"
#include "schedules/region_schedule.h"
#include "schedules/region_signature.h"
#include "schedules/schedule_source.h"
#include "schedules/shared_library.h"

namespace kiln {

namespace {

// Runs a compiled pipeline once on zero-filled buffers of the traced sizes. Halide's
// autoschedulers can split an output by more than its extent, which fails only at run time.
void trial_run(const Graph& g, RegionStep& s) {
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
void schedule(const Graph& g, RegionStep& s, const std::string& scheduler) {
  if (s.cuda) {  // Halide 14's one GPU autoscheduler (li2018) is slow and weak: kiln's own schedule
    if (scheduler != "kiln")
      log_line(LogChannel::schedule, "halide: " + scheduler + " schedules CPU code only; kiln's GPU schedule runs");
    schedule_gpu(g, s.region, s.lowered, row_tuning_of(s.own_schedule));
    return;
  }
  if (scheduler != "kiln") {
    if (s.own_schedule)
      log_line(LogChannel::schedule, "halide: " + scheduler + " schedules this region; its schedule file (" +
                                         s.own_schedule->where + ") sets kiln's schedule only");
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
  schedule_cpu(g, s.region, s.lowered, cpu_tuning_of(s.own_schedule));
}

// With KILN_DEBUG_DIR set: each pipeline's lowered statement as text and HTML, and its assembly.
void dump_region(const RegionStep& s, const std::string& name) {
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

}  // namespace

void build_region(const Graph& g, RegionStep& s, const BackendOptions& options, int index,
                  const std::vector<SizeCondition>& conditions) {
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
    // The key names the file of KILN_SCHEDULE_DIR that would give the region its own tunables.
    std::string own = "; region schedule key " + region_schedule_key(region_signature(g, s.region));
    if (s.own_schedule)
      own += std::string(s.own_schedule->from_database ? ", its tuning database record applied: "
                                                       : ", its schedule file applied: ") + s.own_schedule->where;
    std::string source = "// " + name + " (" + options.scheduler + " schedule" + own + ")\n" + schedule_source(s.lowered.outputs);
    log_line(LogChannel::schedule, source);
    debug_dump(name + ".schedule", "cpp", source);
  }
  dump_region(s, name);
}

std::vector<RegionStep*> region_steps(std::vector<RegionStep>& steps) {
  std::vector<RegionStep*> out;
  for (RegionStep& s : steps)
    if (s.node < 0) out.push_back(&s);
  return out;
}

std::vector<int> same_pipelines(const Graph& g, const std::vector<RegionStep*>& regions) {
  std::vector<const Region*> rs;
  for (const RegionStep* s : regions) rs.push_back(&s->region);
  return first_with_same_signature(g, rs);
}

}  // namespace kiln
