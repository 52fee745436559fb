// The "halide" backend: a graph becomes a sequence of steps, each either a region of lowerable
// nodes compiled into one JIT Halide pipeline, or one node that runs through its eager kernel
// (matmul, random draws, gathers whose indices are checked on the host). Regions are maximal runs
// of lowerable nodes in graph order; a value crosses between steps as a tensor.
#include <algorithm>
#include <atomic>
#include <filesystem>
#include <chrono>
#include <cstring>
#include <map>
#include <set>

#include "dsl/dispatch.h"
#include "dsl/error.h"
#include "dsl/storage.h"
#include "graph/backend.h"
#include "graph/logs.h"
#include "schedules/jit_target.h"
#include "schedules/autoschedulers.h"
#include "schedules/cpu_schedule.h"
#include "schedules/lower_region.h"

namespace kiln {

namespace {

struct Step {
  int node = -1;  // an eager node, or -1 for a region
  Region region;
  LoweredRegion lowered;
  Halide::Pipeline pipeline;
};

// A tensor as a Halide buffer over the same memory (Halide's dims are innermost first).
Halide::Buffer<> as_buffer(const Tensor& t) {
  const TensorImpl& ti = t.impl();
  int rank = int(ti.shape.size());
  std::vector<halide_dimension_t> dims(static_cast<size_t>(rank));
  for (int d = 0; d < rank; ++d) {
    KILN_CHECK(ti.shape[d] <= INT32_MAX && std::abs(ti.strides[d]) <= INT32_MAX, "halide backend: tensor of shape ",
               to_string(ti.shape), " is too large for Halide's 32-bit indexing");
    dims[size_t(rank - 1 - d)] = {0, int32_t(ti.shape[d]), int32_t(ti.strides[d]), 0};
  }
  return Halide::Buffer<>(halide_type(ti.dtype), t.data_ptr(), rank, dims.data());
}

class HalideGraph final : public CompiledGraph {
 public:
  HalideGraph(std::shared_ptr<const Graph> g, std::vector<Step> steps) : g_(std::move(g)), steps_(std::move(steps)) {}

  int kernel_count() const override {
    int n = 0;
    for (const Step& s : steps_) n += s.node < 0 || g_->nodes[size_t(s.node)].op->schedule_class != ScheduleClass::view;
    return n;
  }

  TensorList run(const TensorList& inputs) const override {
    const Graph& g = *g_;
    std::vector<Tensor> values(g.values.size());
    std::map<int, int64_t> symbols;  // root symbol -> size, read off the inputs
    for (size_t i = 0; i < inputs.size(); ++i) {
      int v = g.inputs[i].value;
      values[size_t(v)] = inputs[i];
      const SymShape& sym = g.values[size_t(v)].sym;
      for (size_t d = 0; d < sym.size(); ++d) {
        SymDim c = g.shape_env->canonical(sym[d]);
        if (c.syms.size() == 1 && c.coeff == 1 && !c.opaque) symbols[c.syms[0]] = inputs[i].impl().shape[d];
      }
    }
    auto size_of = [&](const SymDim& raw) {
      SymDim c = g.shape_env->canonical(raw);
      int64_t n = c.coeff;
      for (int s : c.syms) {
        auto it = symbols.find(s);
        KILN_CHECK(it != symbols.end(), "halide backend: symbol s", s, " is not the size of any input");
        n *= it->second;
      }
      return n;
    };
    bool perf = log_enabled(LogChannel::perf);
    for (const Step& s : steps_) {
      auto t0 = std::chrono::steady_clock::now();
      struct Report {  // KILN_LOGS=perf: one line per step
        bool on;
        const Step& s;
        const Graph& g;
        std::chrono::steady_clock::time_point t0;
        ~Report() {
          if (!on) return;
          double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
          std::string what = s.node >= 0 ? "eager " + g.nodes[size_t(s.node)].op->name
                                         : "pipeline of " + std::to_string(s.region.nodes.size()) + " ops";
          log_line(LogChannel::perf, "halide backend: " + what + ": " + std::to_string(int(us)) + " us");
        }
      } report{perf, s, g, t0};
      if (s.node >= 0) {
        const GraphNode& n = g.nodes[size_t(s.node)];
        TensorList args;
        for (int v : n.inputs) args.push_back(values[size_t(v)]);
        TensorList outs = dispatch(*n.op, args, n.attrs);
        for (size_t k = 0; k < n.outputs.size(); ++k) values[size_t(n.outputs[k])] = outs[k];
        continue;
      }
      Halide::ParamMap params;
      for (size_t k = 0; k < s.region.inputs.size(); ++k)
        params.set(s.lowered.inputs[k], as_buffer(values[size_t(s.region.inputs[k])]));
      for (const auto& [sym, p] : s.lowered.symbols) params.set(p, int32_t(symbols.at(sym)));
      std::vector<Halide::Buffer<>> outs;
      for (int v : s.region.outputs) {
        const Value& val = g.values[size_t(v)];
        Shape shape;
        for (const SymDim& d : val.sym) shape.push_back(size_of(d));
        values[size_t(v)] = Tensor::empty(shape, {val.meta.dtype, val.meta.device});
        outs.push_back(as_buffer(values[size_t(v)]));
      }
      Halide::Realization real(outs);
      Halide::Pipeline pipeline = s.pipeline;  // a handle: realize() is not const
      try {
        pipeline.realize(real, jit_target(), params);
      } catch (const Halide::Error& e) {
        throw_error("halide backend: a pipeline of ", s.region.nodes.size(), " ops failed: ", e.what());
      }
    }
    TensorList out;
    for (int v : g.outputs) out.push_back(values[size_t(v)]);
    return out;
  }

 private:
  std::shared_ptr<const Graph> g_;
  std::vector<Step> steps_;
};

// Which nodes go into pipelines. A view joins one only when every reader of it is in a pipeline
// too; a view read by an eager kernel (a transposed weight into matmul) or returned stays a
// view, so no pipeline copies it.
std::vector<bool> lowered_nodes(const Graph& g) {
  // A pipeline's symbols are read off the graph's inputs at run time: only those that are a
  // whole dim of some input can be known (a carried [s0*s1] alone does not give s0).
  std::set<int> known;
  for (const GraphInput& in : g.inputs)
    for (const SymDim& d : g.values[size_t(in.value)].sym) {
      SymDim c = g.shape_env->canonical(d);
      if (!c.opaque && c.coeff == 1 && c.syms.size() == 1) known.insert(c.syms[0]);
    }
  auto symbols_known = [&](const GraphNode& n) {
    std::vector<int> vs = n.inputs;
    vs.insert(vs.end(), n.outputs.begin(), n.outputs.end());
    for (int v : vs)
      for (const SymDim& d : g.values[size_t(v)].sym)
        for (int s : g.shape_env->canonical(d).syms)
          if (!known.count(s)) return false;
    return true;
  };
  std::vector<bool> lower(g.nodes.size());
  std::vector<std::vector<int>> readers(g.values.size());
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    lower[i] = lowerable(g, g.nodes[i]) && symbols_known(g.nodes[i]);
    for (int v : g.nodes[i].inputs) readers[size_t(v)].push_back(int(i));
  }
  std::set<int> outputs(g.outputs.begin(), g.outputs.end());
  for (size_t i = g.nodes.size(); i-- > 0;) {
    const GraphNode& n = g.nodes[i];
    if (!lower[i] || n.op->schedule_class != ScheduleClass::view) continue;
    int v = n.outputs[0];
    bool eager_reader = outputs.count(v) > 0;
    for (int r : readers[size_t(v)]) eager_reader = eager_reader || !lower[size_t(r)];
    if (eager_reader) lower[i] = false;
  }
  return lower;
}

// Splits the graph into steps: maximal runs of lowered nodes, and the others one by one.
std::vector<Step> plan_steps(const Graph& g) {
  std::vector<Step> steps;
  std::vector<bool> lower = lowered_nodes(g);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (!lower[i]) {
      steps.push_back({int(i), {}, {}, {}});
      continue;
    }
    if (steps.empty() || steps.back().node >= 0) steps.push_back({});
    steps.back().region.nodes.push_back(int(i));
  }
  // Each region's inputs (values it reads but does not make) and outputs (values read later or
  // returned).
  std::vector<int> last_use(g.values.size(), -1);
  std::set<int> graph_outputs(g.outputs.begin(), g.outputs.end());
  for (size_t si = 0; si < steps.size(); ++si) {
    auto nodes = steps[si].node >= 0 ? std::vector<int>{steps[si].node} : steps[si].region.nodes;
    for (int n : nodes)
      for (int v : g.nodes[size_t(n)].inputs) last_use[size_t(v)] = int(si);
  }
  for (size_t si = 0; si < steps.size(); ++si) {
    Region& r = steps[si].region;
    if (steps[si].node >= 0) continue;
    std::set<int> made;
    for (int n : r.nodes)
      for (int v : g.nodes[size_t(n)].outputs) made.insert(v);
    for (int n : r.nodes)
      for (int v : g.nodes[size_t(n)].inputs)
        if (!made.count(v) && std::find(r.inputs.begin(), r.inputs.end(), v) == r.inputs.end()) r.inputs.push_back(v);
    for (int v : made)
      if (graph_outputs.count(v) || last_use[size_t(v)] > int(si)) r.outputs.push_back(v);
  }
  return steps;
}

// Halide's own allocations (materialized intermediates) come from kiln's caching allocator:
// fresh multi-megabyte blocks on every call would page-fault each time. The block's size sits in
// a 64-byte header, since Halide frees by pointer only.
constexpr size_t kHeader = 64;
void* pipeline_malloc(Halide::JITUserContext*, size_t n) {
  auto* p = static_cast<uint8_t*>(allocator_for(Device::cpu()).allocate(n + kHeader));
  *reinterpret_cast<size_t*>(p) = n + kHeader;
  return p + kHeader;
}
void pipeline_free(Halide::JITUserContext*, void* ptr) {
  uint8_t* p = static_cast<uint8_t*>(ptr) - kHeader;
  allocator_for(Device::cpu()).release(p, *reinterpret_cast<size_t*>(p));
}

// Runs a compiled pipeline once on zero-filled buffers of the traced sizes. Halide's
// autoschedulers can split an output by more than its extent, which fails only at run time.
void trial_run(const Graph& g, Step& s) {
  Halide::ParamMap params;
  std::vector<Halide::Buffer<>> keep;
  auto buffer = [&](int v) {
    const Value& val = g.values[size_t(v)];
    std::vector<int> extents(val.meta.shape.rbegin(), val.meta.shape.rend());
    Halide::Buffer<> b(halide_type(val.meta.dtype), extents);
    std::memset(b.data(), 0, b.size_in_bytes());
    return b;
  };
  for (size_t k = 0; k < s.region.inputs.size(); ++k) {
    keep.push_back(buffer(s.region.inputs[k]));
    params.set(s.lowered.inputs[k], keep.back());
  }
  for (const auto& [sym, p] : s.lowered.symbols) params.set(p, int32_t(g.shape_env->symbol(sym).hint));
  std::vector<Halide::Buffer<>> outs;
  for (int v : s.region.outputs) outs.push_back(buffer(v));
  Halide::Realization real(outs);
  s.pipeline.realize(real, jit_target(), params);
}

// kiln's schedule, or one of Halide's autoschedulers (kiln's schedule when it fails).
void schedule(const Graph& g, Step& s, const std::string& scheduler) {
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

// With KILN_DEBUG_DIR set, each pipeline's lowered statement (loop nests, allocations, vectors).
void dump_stmt(Step& s) {
  std::string dir = debug_dir();
  if (dir.empty()) return;
  static std::atomic<int> counter{0};
  std::vector<Halide::Argument> args;
  for (const Halide::ImageParam& p : s.lowered.inputs) args.push_back(p);
  for (const auto& [sym, p] : s.lowered.symbols) args.push_back(p);
  std::filesystem::create_directories(dir);
  s.pipeline.compile_to_lowered_stmt(dir + "/halide_region_" + std::to_string(++counter) + ".stmt", args,
                                     Halide::Text, jit_target());
}

class HalideBackend final : public Backend {
 public:
  std::string_view name() const override { return "halide"; }

  void check(const BackendOptions& options) const override {
    auto names = halide_autoscheduler_names();
    KILN_CHECK(options.scheduler == "kiln" || std::find(names.begin(), names.end(), options.scheduler) != names.end(),
               "compile: unknown scheduler '", options.scheduler, "' (kiln, mullapudi2016, adams2019, li2018)");
  }

  std::shared_ptr<CompiledGraph> compile(std::shared_ptr<const Graph> g, const BackendOptions& options) override {
    std::vector<Step> steps = plan_steps(*g);
    for (Step& s : steps) {
      if (s.node >= 0 || s.region.outputs.empty()) continue;
      s.lowered = lower_region(*g, s.region);
      s.pipeline = Halide::Pipeline(s.lowered.outputs);
      schedule(*g, s, options.scheduler);
      s.pipeline.jit_handlers().custom_malloc = &pipeline_malloc;
      s.pipeline.jit_handlers().custom_free = &pipeline_free;
      dump_stmt(s);
      auto t0 = std::chrono::steady_clock::now();
      s.pipeline.compile_jit(jit_target());
      double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      log_line(LogChannel::output_code, "halide: region of " + std::to_string(s.region.nodes.size()) + " ops, " +
                                            std::to_string(s.region.outputs.size()) + " outputs, jit " +
                                            std::to_string(int(ms)) + " ms");
    }
    steps.erase(std::remove_if(steps.begin(), steps.end(), [](const Step& s) {
                  return s.node < 0 && s.region.outputs.empty();
                }),
                steps.end());
    return std::make_shared<HalideGraph>(std::move(g), std::move(steps));
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
