#include "schedules/graph_executor.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <optional>
#include <utility>

#include "autograd/grad_mode.h"
#include "dsl/dispatch.h"
#include "dsl/eager/kernel_call.h"
#include "dsl/error.h"
#include "dsl/profiler.h"
#include "graph/logs.h"
#include "dsl/cuda/cuda_context.h"
#include "schedules/in_place.h"
#include "schedules/kept_outputs.h"
#include "graph/step_timing.h"

namespace kiln {

std::vector<std::shared_ptr<PackedWeight>> region_packers(const Region& r) {
  std::vector<std::shared_ptr<PackedWeight>> out;
  for (int v : r.inputs)
    out.push_back(std::find(r.packed.begin(), r.packed.end(), v) != r.packed.end()
                      ? std::make_shared<PackedWeight>(PackedWeight::Layout::panels)
                      : nullptr);
  return out;
}

std::string region_what(const Region& r) { return "a pipeline of " + std::to_string(r.nodes.size()) + " ops"; }

namespace {
std::atomic<int64_t> in_place_run{0};
thread_local RegionObserver* region_observer = nullptr;
}  // namespace

int64_t in_place_outputs_run() { return in_place_run.load(); }

std::string step_what(const Graph& g, const ExecutorStep& s) {
  if (s.node >= 0) {
    const GraphNode& n = g.nodes[size_t(s.node)];
    return n.op->name + " -> " + to_string(g.values[size_t(n.outputs[0])].meta.shape);
  }
  std::string ops;
  for (size_t k = 0; k < s.region.nodes.size() && k < 8; ++k) ops += (k ? " " : "") + g.nodes[size_t(s.region.nodes[k])].op->name;
  if (s.region.nodes.size() > 8) ops += " ...";
  std::string out = s.region.outputs.empty() ? "" : " -> " + to_string(g.values[size_t(s.region.outputs[0])].meta.shape);
  return region_what(s.region) + " (" + ops + ")" + out;
}

RegionObserver* exchange_region_observer(RegionObserver* observer) { return std::exchange(region_observer, observer); }

std::vector<halide_dimension_t> halide_dims(const Tensor& t) {
  const TensorImpl& ti = t.impl();
  int rank = int(ti.shape.size());
  std::vector<halide_dimension_t> dims(static_cast<size_t>(rank));
  for (int d = 0; d < rank; ++d) {
    KILN_CHECK(ti.shape[d] <= INT32_MAX && std::abs(ti.strides[d]) <= INT32_MAX, "halide backend: tensor of shape ",
               to_string(ti.shape), " is too large for Halide's 32-bit indexing");
    dims[size_t(rank - 1 - d)] = {0, int32_t(ti.shape[d]), int32_t(ti.strides[d]), 0};
  }
  return dims;
}

namespace {

// A tensor as a raw halide_buffer_t for a cached pipeline: host memory, or CUDA memory tagged with
// the device interface of the runtime its code calls (up to date on the device: Halide copies
// nothing).
struct RawBuffer {
  halide_buffer_t buf{};
  std::vector<halide_dimension_t> dims;

  RawBuffer(const Tensor& t, const CodeLibrary& code) : dims(halide_dims(t)) {
    buf.type = halide_buffer_type(t.dtype());
    buf.dimensions = int32_t(dims.size());
    buf.dim = dims.data();
    if (t.device().is_cuda()) {
      buf.device = reinterpret_cast<uint64_t>(t.data_ptr());
      buf.device_interface = code.cuda_interface();
    } else {
      buf.host = static_cast<uint8_t*>(t.data_ptr());
    }
  }
  RawBuffer(const RawBuffer&) = delete;
  RawBuffer& operator=(const RawBuffer&) = delete;
};

class GraphExecutor final : public CompiledGraph {
 public:
  explicit GraphExecutor(ExecutorPlan plan)
      : plan_(std::move(plan)), g_(plan_.graph), steps_(plan_.steps), in_place_(plan_.in_place), over_(plan_.over) {
    // Where each symbol's size is read at run time, and every region output's dims, canonical.
    const Graph& graph = *g_;
    for (size_t i = 0; i < graph.inputs.size(); ++i) {
      const SymShape& sym = graph.values[size_t(graph.inputs[i].value)].sym;
      for (size_t d = 0; d < sym.size(); ++d) {
        SymDim c = graph.shape_env->canonical(sym[d]);
        if (c.syms.size() == 1 && c.coeff == 1 && !c.opaque) symbol_sources_.push_back({c.syms[0], i, d});
      }
    }
    for (const ExecutorStep& s : steps_)
      for (int v : s.region.outputs) output_dims_[v] = graph.shape_env->canonical(graph.values[size_t(v)].sym);
    plan_releases();
    on_cuda_ = graph.on_cuda();
    for (const ExecutorStep& s : steps_)
      kept_.push_back(s.node < 0 && keeps_outputs(graph, s.region, in_place_, over_) ? std::make_unique<KeptOutputs>()
                                                                                     : nullptr);
  }

  int kernel_count() const override {
    int n = 0;
    for (const ExecutorStep& s : steps_) n += s.node < 0 || g_->nodes[size_t(s.node)].op->schedule_class != ScheduleClass::view;
    return n;
  }

  const ExecutorPlan& plan() const { return plan_; }

  TensorList run(const TensorList& inputs) const override {
    NoGradGuard no_grad;  // its eager steps never record: a graph's backward is a graph of its own
    const Graph& g = *g_;
    std::vector<Tensor> values(g.values.size());
    for (size_t i = 0; i < inputs.size(); ++i) values[size_t(g.inputs[i].value)] = inputs[i];
    std::map<int, Tensor> into;  // this run's in-place outputs: the input tensors they overwrite
    for (const auto& [v, positions] : in_place_) {
      const Tensor& t = inputs[size_t(positions[0])];
      bool alone = t.impl().offset == 0 && t.is_contiguous() && !t.is_traced();
      for (size_t j = 0; alone && j < inputs.size(); ++j)
        alone = !inputs[j].shares_storage_with(t) || std::count(positions.begin(), positions.end(), int(j)) > 0;
      if (alone) into[v] = t;
    }
    in_place_run += int64_t(into.size());
    std::vector<int64_t> symbols(size_t(g.shape_env->symbol_count()), -1);
    for (const SymbolSource& src : symbol_sources_) symbols[size_t(src.symbol)] = inputs[src.input].impl().shape[src.dim];
    bool perf = log_enabled(LogChannel::perf);
    StepTimer* timer = on_cuda_ ? active_step_timer() : nullptr;
    for (size_t si = 0; si < steps_.size(); ++si) {
      const ExecutorStep& s = steps_[si];
      auto t0 = std::chrono::steady_clock::now();
      if (timer) timer->before(step_category(s), step_what(*g_, s));
      std::optional<RecordFunction> record;
      if (profiling()) record.emplace(step_what(*g_, s), s.node >= 0 ? "eager_step" : "region");
      if (s.node >= 0) {
        const GraphNode& n = g.nodes[size_t(s.node)];
        TensorList args;
        for (int v : n.inputs) args.push_back(values[size_t(v)]);
        if (s.packed_b) args[1] = s.packed_b->get(args[1]);
        TensorList outs = dispatch(*n.op, args, n.attrs);
        for (size_t k = 0; k < n.outputs.size(); ++k) values[size_t(n.outputs[k])] = outs[k];
      } else if (kept_[si]) {
        run_kept_region(s, *kept_[si], symbols, values, into);
      } else {
        run_region(s, symbols, values, into);
      }
      if (timer) timer->after();
      for (int v : released_after_[si]) values[size_t(v)] = Tensor();
      if (perf)
        log_line(LogChannel::perf, "halide backend: " +
                                       (s.node >= 0 ? "eager " + g.nodes[size_t(s.node)].op->name : region_what(s.region)) +
                                       ": " + std::to_string(int(1000 * ms_since(t0))) + " us");
    }
    TensorList out;
    for (int v : g.outputs) out.push_back(values[size_t(v)]);
    return out;
  }

 private:
  struct SymbolSource {
    int symbol;
    size_t input, dim;
  };

  // Each intermediate is dropped after the last step that reads it (or, unread, after the step
  // that makes it), as eager mode drops a tensor at its last use: the allocator can give its
  // memory, often still in cache, to a later value, and a step holds only what is live. A
  // transformer_block train step, one compiled step alternating with and without: 57.5 -> 57.0
  // ms. Graph inputs and outputs are never dropped.
  void plan_releases() {
    const Graph& g = *g_;
    std::vector<int> last(g.values.size(), -1);
    for (size_t si = 0; si < steps_.size(); ++si) {
      const ExecutorStep& s = steps_[si];
      const std::vector<int>& made = s.node >= 0 ? g.nodes[size_t(s.node)].outputs : s.region.outputs;
      for (int v : made) last[size_t(v)] = int(si);
      const std::vector<int>& read = s.node >= 0 ? g.nodes[size_t(s.node)].inputs : s.region.inputs;
      for (int v : read) last[size_t(v)] = int(si);
    }
    for (const GraphInput& in : g.inputs) last[size_t(in.value)] = -1;
    for (int v : g.outputs) last[size_t(v)] = -1;
    released_after_.assign(steps_.size(), {});
    for (size_t v = 0; v < last.size(); ++v)
      if (last[v] >= 0) released_after_[size_t(last[v])].push_back(int(v));
  }

  void run_region(const ExecutorStep& s, const std::vector<int64_t>& symbols, std::vector<Tensor>& values,
                  const std::map<int, Tensor>& into) const {
    std::vector<Tensor> tensors;  // the pipeline's buffers: inputs, then outputs
    for (size_t k = 0; k < s.region.inputs.size(); ++k) {
      const Tensor& t = values[size_t(s.region.inputs[k])];
      tensors.push_back(s.packers[k] ? s.packers[k]->get(t) : t);
    }
    std::vector<int32_t> sizes;
    for (int sym : s.region.symbols) {
      KILN_CHECK(symbols[size_t(sym)] >= 0, "halide backend: symbol s", sym, " is not the size of any input");
      sizes.push_back(int32_t(symbols[size_t(sym)]));
    }
    for (int v : s.region.outputs) {
      Shape shape;
      for (const SymDim& d : output_dims_.at(v)) {
        int64_t n = d.coeff;
        for (int sym : d.syms) n *= symbols[size_t(sym)];
        shape.push_back(n);
      }
      values[size_t(v)] = memory_for(v, shape, values, into);
      tensors.push_back(values[size_t(v)]);
    }
    if (region_observer) (*region_observer)(g_, s, tensors, sizes);
    if (s.function) {
      run_region_function(s.function, *plan_.code, s.region, tensors, sizes);
      return;
    }
    s.jit(tensors, sizes);
  }

  // A region of parameters only (kept_outputs.h): its outputs from the last call while the
  // parameters are unchanged, else computed and kept.
  void run_kept_region(const ExecutorStep& s, KeptOutputs& kept, const std::vector<int64_t>& symbols,
                       std::vector<Tensor>& values, const std::map<int, Tensor>& into) const {
    std::vector<Tensor> inputs;
    for (int v : s.region.inputs) inputs.push_back(values[size_t(v)]);
    std::vector<Tensor> outputs = kept.get(inputs);
    if (outputs.size() == s.region.outputs.size()) {
      for (size_t k = 0; k < outputs.size(); ++k) values[size_t(s.region.outputs[k])] = outputs[k];
      return;
    }
    std::vector<TensorStamp> sources = KeptOutputs::stamps(inputs);
    run_region(s, symbols, values, into);
    for (int v : s.region.outputs) outputs.push_back(values[size_t(v)]);
    kept.put(std::move(sources), std::move(outputs));
  }

  // The tensor output v is computed into: the input it overwrites (in_place_), the dying
  // intermediate whose memory it takes when nothing else holds that memory now (over_), or a new one.
  Tensor memory_for(int v, const Shape& shape, const std::vector<Tensor>& values, const std::map<int, Tensor>& into) const {
    auto dst = into.find(v);
    if (dst != into.end() && dst->second.shape() == shape) return dst->second;
    auto x = over_.find(v);
    if (x != over_.end()) {
      const Tensor& t = values[size_t(x->second)];
      if (t.defined() && t.shape() == shape && t.storage_offset() == 0 && t.is_contiguous() &&
          t.storage().use_count() == 1)
        return t;
    }
    const Value& val = g_->values[size_t(v)];
    return Tensor::empty(shape, {val.meta.dtype, val.meta.device});
  }

  // The category of a step for StepTimer: a cuBLAS GEMM, a pipeline, another eager kernel, a view.
  std::string step_category(const ExecutorStep& s) const {
    if (s.node < 0) return "pipeline";
    const OpDef& op = *g_->nodes[size_t(s.node)].op;
    if (op.gemm) return "cublas_gemm";
    return op.schedule_class == ScheduleClass::view ? "view" : "eager_kernel";
  }

  ExecutorPlan plan_;
  // Aliases of the plan's parts (declared after it).
  const std::shared_ptr<const Graph>& g_;
  const std::vector<ExecutorStep>& steps_;
  bool on_cuda_ = false;
  std::vector<SymbolSource> symbol_sources_;
  std::map<int, SymShape> output_dims_;
  std::vector<std::vector<int>> released_after_;  // per step: the values no later step reads
  std::vector<std::unique_ptr<KeptOutputs>> kept_;  // per step: its kept outputs (kept_outputs.h), or null
  // Outputs computed into an input's tensor (in_place.h): value -> the input positions bound to it.
  const std::map<int, std::vector<int>>& in_place_;
  const std::map<int, int>& over_;  // outputs computed over a dying intermediate: value -> that intermediate
};

}  // namespace

void run_region_function(RegionFunction fn, const CodeLibrary& code, const Region& r, const std::vector<Tensor>& tensors,
                         std::vector<int32_t> sizes) {
  size_t n_in = r.inputs.size();
  std::vector<std::unique_ptr<RawBuffer>> buffers;
  std::vector<void*> args;
  for (const Tensor& t : tensors) buffers.push_back(std::make_unique<RawBuffer>(t, code));
  for (size_t k = 0; k < n_in; ++k) args.push_back(&buffers[k]->buf);
  for (int32_t& size : sizes) args.push_back(&size);
  for (size_t k = n_in; k < buffers.size(); ++k) args.push_back(&buffers[k]->buf);
  call_region(fn, args.data(), region_what(r));
}

std::shared_ptr<CompiledGraph> make_graph_executor(ExecutorPlan plan) {
  return std::make_shared<GraphExecutor>(std::move(plan));
}

const ExecutorPlan* executor_plan(const CompiledGraph& g) {
  const auto* e = dynamic_cast<const GraphExecutor*>(&g);
  return e ? &e->plan() : nullptr;
}

void call_region(RegionFunction fn, void** args, const std::string& what) {
  std::string message;
  int status = call_halide(fn, args, message);
  if (status != 0)
    throw_error("halide backend: ", what, " failed (Halide error ", status, ")",
                message.empty() ? std::string() : ": " + message);
}

}  // namespace kiln
