#include "graph/cuda_graphs.h"

#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <tuple>
#include <vector>

#include "dsl/caching_allocator.h"
#include "dsl/cuda/cuda_allocator.h"
#include "dsl/cuda/cuda_api.h"
#include "dsl/cuda/cuda_context.h"
#include "dsl/cuda/halide_device_memory.h"
#include "dsl/error.h"
#include "dsl/settings.h"
#include "dsl/storage.h"
#include "dsl/tensor_stamp.h"
#include "dsl/op_def.h"
#include "graph/logs.h"
#include "graph/step_timing.h"

namespace kiln {

namespace {

constexpr int kWarmupCalls = 2;  // per layout, before its capture
constexpr size_t kMaxLayouts = 8;

std::atomic<uint64_t> captures{0}, replays{0}, fallbacks{0};

// Where an input's elements start: its storage's memory and its offset.
using Address = std::pair<const void*, int64_t>;
Address address_of(const Tensor& t) { return {t.storage()->data, t.storage_offset()}; }

// A layout of the inputs: what a captured graph is specialized to.
using Layout = std::vector<std::tuple<Shape, Strides, DType>>;

Layout layout_of(const TensorList& inputs) {
  Layout l;
  for (const Tensor& t : inputs) l.emplace_back(t.shape(), t.strides(), t.dtype());
  return l;
}

// One layout's captured graph and what its replays need.
struct Capture {
  int warm_calls = 0;
  std::vector<std::vector<Address>> seen;  // the inputs' addresses at each warm-up call
  std::string reason;                      // why it cannot be captured ("" while it can)
  CUgraphExec exec = nullptr;
  CachingAllocator* allocator = nullptr;
  int allocator_index = 0;  // the device's
  CachingAllocator::PoolId pool = 0;
  std::unique_ptr<HalideMemoryHold> hold;
  std::unique_ptr<CapturedArguments> arguments;  // launch arguments its kernels read at each replay
  std::vector<std::optional<Tensor>> buffers;  // per input: the graph's copy, or none (read in place)
  std::vector<Address> in_place;               // per input: the address captured
  // Per captured tensor read in place, when the graph keeps outputs of regions of parameters only
  // (the capture read them, computed before it): the tensor as captured. A replay after one
  // changed would read stale kept outputs, so the call is captured again.
  std::vector<std::optional<TensorStamp>> stamps;
  TensorList outputs;
  std::vector<bool> in_graph_memory;           // per output: in the pool (not an input's own memory)
  // The storages the last replay handed out over the graph's memory: any still referenced when
  // the next replay starts is copied out first (keep_values).
  std::vector<std::weak_ptr<Storage>> handed_out;

  Capture() = default;
  Capture(const Capture&) = delete;
  Capture& operator=(const Capture&) = delete;
  ~Capture() { drop(); }

  void drop() {
    if (exec) {
      cuda_synchronize(allocator_index);  // a replay in flight still reads its arguments
      cuda_api().cuGraphExecDestroy(exec);
    }
    exec = nullptr;
    keep_values();
    arguments.reset();
    outputs.clear();
    in_graph_memory.clear();
    buffers.clear();
    if (pool != 0) allocator->release_pool(pool);  // live outputs join the general cache when freed
    pool = 0;
    hold.reset();
  }

  // Outputs of the last replay that are still referenced get memory of their own, with their
  // values copied on the stream before anything overwrites the graph's memory; the storage object
  // is the same, so every view of them follows.
  void keep_values() {
    for (const std::weak_ptr<Storage>& w : handed_out) {
      std::shared_ptr<Storage> st = w.lock();
      if (!st) continue;
      CachingAllocator& general = cuda_caching_allocator(st->device.index);
      void* fresh = general.allocate(st->nbytes);
      check_cuda(cuda_api().cuMemcpyDtoDAsync(CUdeviceptr(fresh), CUdeviceptr(st->data), st->nbytes,
                                              cuda_context(st->device.index).stream),
                 "cuda graphs: keeping an output of the last replay");
      st->data = fresh;
      st->allocator = &general;
    }
    handed_out.clear();
  }
};

class CudaGraphed final : public CompiledGraph {
 public:
  CudaGraphed(std::shared_ptr<CompiledGraph> inner, std::string label, std::string never, std::vector<bool> guarded)
      : inner_(std::move(inner)), label_(std::move(label)), never_(std::move(never)), guarded_(std::move(guarded)) {}

  int kernel_count() const override { return inner_->kernel_count(); }

  TensorList run(const TensorList& inputs) const override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!never_.empty()) return fall_back(inputs, never_);
    std::optional<Device> device = cuda_device(inputs);
    if (!device) return fall_back(inputs, "an input is not a CUDA tensor, or there is none");
    Layout layout = layout_of(inputs);
    auto it = captures_.find(layout);
    if (it == captures_.end()) {
      if (captures_.size() >= kMaxLayouts)
        return fall_back(inputs, "more than " + std::to_string(kMaxLayouts) + " input layouts");
      it = captures_.emplace(layout, std::make_unique<Capture>()).first;
    }
    Capture& c = *it->second;
    if (!c.reason.empty()) return fall_back(inputs, c.reason);
    if (c.exec) {
      if (std::string moved = moved_input(c, inputs); !moved.empty()) {
        hint(moved + ": captured again");
        c.drop();
        c.warm_calls = 0;
        c.seen.clear();
      } else {
        return replay(c, inputs, *device);
      }
    }
    if (c.warm_calls < kWarmupCalls) {
      TensorList out = inner_->run(inputs);
      ++c.warm_calls;
      std::vector<Address> at;
      for (const Tensor& t : inputs) at.push_back(address_of(t));
      c.seen.push_back(std::move(at));
      for (const Tensor& t : out)
        if (t.defined() && !t.grad_fn_name().empty())
          c.reason = "its outputs record autograd history (the backward would read tensors the next replay overwrites)";
      return out;
    }
    if (!capture(c, inputs, *device)) return fall_back(inputs, c.reason);
    return replay(c, inputs, *device);
  }

 private:
  // The one CUDA device of all inputs; none when an input is elsewhere or there is no input.
  static std::optional<Device> cuda_device(const TensorList& inputs) {
    std::optional<Device> d;
    for (const Tensor& t : inputs) {
      if (!t.defined() || !t.device().is_cuda() || (d && t.device() != *d)) return std::nullopt;
      d = t.device();
    }
    return d;
  }

  // Why the inputs read in place cannot be this time ("" when they can).
  static std::string moved_input(const Capture& c, const TensorList& inputs) {
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!c.buffers[i] && address_of(inputs[i]) != c.in_place[i])
        return "input " + std::to_string(i) + " (read in place by the graph) is at another address";
      if (c.stamps[i] && !c.stamps[i]->matches(inputs[i]))
        return "input " + std::to_string(i) + " changed since the capture, which read outputs kept from it";
    }
    return "";
  }

  TensorList fall_back(const TensorList& inputs, const std::string& reason) const {
    hint(reason);
    ++fallbacks;
    return inner_->run(inputs);
  }

  void hint(const std::string& reason) const {
    if (hinted_.insert(reason).second)
      log_line(LogChannel::perf_hints, label_ + ": not replayed as a CUDA graph: " + reason);
  }

  // Captures the call into c; false with c.reason set when it cannot be.
  bool capture(Capture& c, const TensorList& inputs, Device device) const {
    const CudaApi& api = cuda_api();
    CudaContext& ctx = cuda_context(device.index);
    c.allocator = &cuda_caching_allocator(device.index);
    c.allocator_index = device.index;
    c.arguments = std::make_unique<CapturedArguments>();
    c.arguments->index = device.index;
    c.pool = c.allocator->create_pool();
    c.hold = std::make_unique<HalideMemoryHold>();
    TensorList in = inputs;
    c.buffers.assign(inputs.size(), std::nullopt);
    c.in_place.assign(inputs.size(), Address{});
    c.stamps.assign(inputs.size(), std::nullopt);
    for (size_t i = 0; i < inputs.size(); ++i) {
      const Tensor& t = inputs[i];
      bool moves = c.seen.front()[i] != c.seen.back()[i] || address_of(t) != c.seen.back()[i];
      if (!moves) {
        c.in_place[i] = address_of(t);
        if (guarded_[i]) c.stamps[i] = TensorStamp::of(t);
        continue;
      }
      if (!t.is_contiguous()) {
        c.reason = "input " + std::to_string(i) + " changes address between calls and is not contiguous";
        c.drop();
        return false;
      }
      {
        PoolScope in_pool(*c.allocator, c.pool);
        c.buffers[i] = Tensor::empty(t.shape(), t.options());
      }
      c.buffers[i]->copy_(t);
      in[i] = *c.buffers[i];
    }
    CudaCounters before = cuda_counters();
    check_cuda(api.cuStreamBeginCapture(ctx.stream, kStreamCaptureModeRelaxed), "cuda graphs: beginning a capture");
    std::string failure;
    TensorList out;
    {
      PoolScope in_pool(*c.allocator, c.pool);
      ArgumentCaptureScope arguments(*c.arguments);
      try {
        out = inner_->run(in);
      } catch (const std::exception& e) {
        failure = std::string("the call failed under capture (") + e.what() + ")";
      }
    }
    CUgraph graph = nullptr;
    CUresult ended = api.cuStreamEndCapture(ctx.stream, &graph);
    CudaCounters after = cuda_counters();
    if (failure.empty() && ended != 0)
      failure = "the capture was invalidated (a host wait or an operation a stream capture does not allow)";
    if (failure.empty() && (after.host_to_device != before.host_to_device ||
                            after.device_to_host != before.device_to_host ||
                            after.argument_uploads != before.argument_uploads))
      failure = "the call copies between host and device (a value read or made on the host)";
    if (failure.empty() && after.synchronizations != before.synchronizations) failure = "the call waits for the device";
    if (failure.empty()) {
      CUresult made = api.cuGraphInstantiateWithFlags(&c.exec, graph, 0);
      if (made != 0) failure = "cuGraphInstantiateWithFlags failed (" + std::to_string(made) + ")";
    }
    if (graph) api.cuGraphDestroy(graph);
    if (failure.empty()) c.arguments->upload();
    if (!failure.empty()) {
      out.clear();
      c.reason = failure;
      c.drop();
      return false;
    }
    c.outputs = std::move(out);
    for (const Tensor& t : c.outputs) {
      bool input = false;  // an input's own memory (a parameter written in place), read in place
      for (size_t i = 0; i < inputs.size(); ++i)
        input = input || (!c.buffers[i] && t.defined() && t.storage() == inputs[i].storage());
      c.in_graph_memory.push_back(t.defined() && !input);
    }
    ++captures;
    log_line(LogChannel::perf, label_ + ": captured a CUDA graph (" + std::to_string(inner_->kernel_count()) +
                                   " kernels a call before)");
    return true;
  }

  // Outputs in the graph's memory go out on storages of their own that do not own it (one per
  // replay), so that keep_values can give the ones still referenced at the next replay memory of
  // their own.
  static TensorList replay(Capture& c, const TensorList& inputs, Device device) {
    c.keep_values();
    for (size_t i = 0; i < inputs.size(); ++i)
      if (c.buffers[i]) c.buffers[i]->copy_(inputs[i]);
    StepTimer* timer = active_step_timer();  // `kiln bench gpu`'s breakdown: the replay is one step
    if (timer) timer->before("cuda_graph", "a CUDA graph replay");
    check_cuda(cuda_api().cuGraphLaunch(c.exec, cuda_context(device.index).stream), "cuda graphs: launching a graph");
    if (timer) timer->after();
    ++replays;
    TensorList out;
    std::map<const Storage*, std::shared_ptr<Storage>> handed;  // outputs sharing memory share a storage
    for (size_t k = 0; k < c.outputs.size(); ++k) {
      const Tensor& t = c.outputs[k];
      if (!t.defined() || !c.in_graph_memory[k]) {
        out.push_back(t.defined() ? t.detach() : t);  // an input's own memory
        continue;
      }
      std::shared_ptr<Storage>& st = handed[t.storage().get()];
      if (!st) {
        st = std::make_shared<Storage>(t.storage()->data, t.storage()->nbytes, t.device(), nullptr);
        c.handed_out.push_back(st);
      }
      out.push_back(Tensor::make_view(st, t.shape(), t.strides(), t.storage_offset(), t.dtype()));
    }
    return out;
  }

  std::shared_ptr<CompiledGraph> inner_;
  std::string label_;
  std::string never_;  // why no call of this graph can be captured ("" when calls may be)
  // Per input: a captured tensor (a parameter) of a graph that keeps outputs (graph_keeps_outputs),
  // which replays check for changes.
  std::vector<bool> guarded_;
  mutable std::mutex mu_;
  mutable std::map<Layout, std::unique_ptr<Capture>> captures_;
  mutable std::set<std::string> hinted_;
};

}  // namespace

std::shared_ptr<CompiledGraph> with_cuda_graphs(const Graph& g, std::shared_ptr<CompiledGraph> inner, std::string label) {
  std::string never;
  for (const GraphNode& n : g.nodes)
    if (n.op->random) never = "it draws random numbers (" + n.op->name + "; a replay would repeat them)";
    else if (n.op->collective) never = "it communicates with other processes (" + n.op->name + ")";
  std::vector<bool> guarded;
  for (const GraphInput& in : g.inputs) guarded.push_back(graph_keeps_outputs(g) && in.kind == InputKind::captured);
  return std::make_shared<CudaGraphed>(std::move(inner), std::move(label), std::move(never), std::move(guarded));
}

bool cuda_graphs_wanted(const std::string& mode) {
  KILN_CHECK(mode == "default" || mode == "reduce-overhead", "compile: mode must be \"default\" or \"reduce-overhead\", got \"",
             mode, "\"");
  return mode == "reduce-overhead" || flag_setting("KILN_CUDA_GRAPHS", false);
}

CudaGraphCounters cuda_graph_counters() { return {captures.load(), replays.load(), fallbacks.load()}; }

}  // namespace kiln
