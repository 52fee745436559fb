#include "aot/model.h"

#include <HalideRuntime.h>
#include <HalideRuntimeCuda.h>

#include <set>
#include <sstream>

#include "aot/manifest.h"
#include "dsl/cuda/cuda_api.h"
#include "dsl/eager/kernel_call.h"
#include "dsl/error.h"
#include "dsl/nn/state_dict.h"
#include "dsl/storage.h"
#include "graph/graph.h"
#include "graph/logs.h"
#include "schedules/graph_executor.h"
#include "schedules/plan_file.h"

namespace kiln::aot {

namespace {

// The generated library's table of region functions, by name.
class StaticFunctions final : public CodeLibrary {
 public:
  explicit StaticFunctions(const ModelCode& code) : model_(code.name) {
    for (size_t i = 0; i < code.function_count; ++i) functions_[code.functions[i].name] = code.functions[i].function;
  }
  RegionFunction function(const std::string& name) const override {
    auto it = functions_.find(name);
    KILN_CHECK(it != functions_.end(), "model ", model_, ": its library has no compiled function '", name, "'");
    return it->second;
  }
  // The CUDA regions were compiled without a runtime of their own: they call the one linked into
  // kiln::runtime with the eager kernels, whose device interface their buffers carry.
  const halide_device_interface_t* cuda_interface() const override { return halide_cuda_device_interface(); }

 private:
  std::string model_;
  std::map<std::string, RegionFunction> functions_;
};

std::map<std::string, Tensor> weights_file(const std::string& model, const std::string& path) {
  std::map<std::string, Tensor> out;
  try {
    for (auto& [name, t] : nn::load_safetensors(path)) out[name] = t;
  } catch (const Error& e) {
    throw_error("model ", model, ": cannot load its weights: ", e.what());
  }
  return out;
}

}  // namespace

struct Model::State {
  Manifest manifest;
  std::shared_ptr<const Graph> graph;
  std::shared_ptr<CompiledGraph> compiled;
  std::vector<Tensor> bound;  // per graph input: its weight, or undefined for an argument
  std::vector<SymShape> shapes;  // per graph input: its canonical symbolic shape, for run()'s checks
  Device device = Device::cpu();  // where its inputs, weights and outputs live

  const std::string& name() const { return manifest.model; }

  // The declared range of input `input`'s dim `dim`, if it is dynamic.
  const DynamicRange* range(int input, int dim) const {
    for (const DynamicRange& r : manifest.dynamic)
      if (r.input == input && r.dim == dim) return &r;
    return nullptr;
  }

  // Code compiled for CPU features this machine lacks would die on an illegal instruction.
  void check_target() const {
    if (manifest.target_features.empty()) return;
    std::vector<uint64_t> words((size_t(halide_target_feature_end) + 63) / 64, 0);
    for (int f : manifest.target_features)
      if (f < int(halide_target_feature_end)) words[size_t(f) / 64] |= uint64_t(1) << (f % 64);
    KILN_CHECK(halide_can_use_target_features(int(words.size()), words.data()), "model ", name(),
               ": its code was compiled for ", manifest.target, ", and this CPU lacks some of those features; "
               "build the model on (or for) a machine like this one");
  }

  void check_graph() const {
    const Graph& g = *graph;
    KILN_CHECK(!g.joint, "model ", name(), ": its graph is a joint forward and backward graph, which AOT models "
               "do not run");
    std::set<int> written;
    for (const auto& [output, input] : g.writes) {
      KILN_CHECK(g.inputs[size_t(input)].kind == InputKind::captured, "model ", name(),
                 ": its graph writes an input that is not a weight");
      written.insert(output);
    }
    KILN_CHECK(g.outputs.size() == size_t(manifest.outputs) + written.size(), "model ", name(), ": its graph has ",
               g.outputs.size(), " outputs, its manifest says ", manifest.outputs, " and ", written.size(),
               " written back");
    for (const GraphInput& in : g.inputs) {
      KILN_CHECK(in.kind == InputKind::argument || in.kind == InputKind::captured, "model ", name(), ": graph input '",
                 in.name, "' is of kind ", kiln::name(in.kind), ", which an AOT model cannot bind");
      KILN_CHECK(in.kind != InputKind::argument || in.index < int(manifest.inputs.size()), "model ", name(),
                 ": graph input '", in.name, "' is argument ", in.index, " of ", manifest.inputs.size());
    }
  }

  void bind_weights(const std::map<std::string, Tensor>& weights, const std::string& from) {
    const Graph& g = *graph;
    bound.resize(g.inputs.size());
    for (size_t i = 0; i < g.inputs.size(); ++i) {
      const GraphInput& in = g.inputs[i];
      if (in.kind != InputKind::captured) continue;
      const TensorMeta& meta = g.values[size_t(in.value)].meta;
      auto it = weights.find(in.name);
      KILN_CHECK(it != weights.end(), "model ", name(), ": ", from, " has no tensor '", in.name, "' (", meta.dtype,
                 " ", to_string(meta.shape), ")");
      const Tensor& w = it->second;
      KILN_CHECK(w.defined(), "model ", name(), ": weight '", in.name, "' is undefined");
      KILN_CHECK(w.dtype() == meta.dtype && w.shape() == meta.shape, "model ", name(), ": weight '", in.name,
                 "' from ", from, " is ", w.dtype(), " ", to_string(w.shape()), "; the model was built for ", meta.dtype,
                 " ", to_string(meta.shape));
      bound[i] = w.detach().to(meta.device).contiguous();
    }
  }
};

Model::Model(const ModelCode& code, const std::string& weights_path)
    : Model(code, weights_file(code.name, weights_path), weights_path) {}

Model::Model(const ModelCode& code, const std::map<std::string, Tensor>& weights)
    : Model(code, weights, "the weights given") {}

Model::Model(const ModelCode& code, const std::map<std::string, Tensor>& weights, const std::string& from) {
  auto s = std::make_shared<State>();
  s->manifest = read_manifest(code.manifest);
  KILN_CHECK(s->manifest.model == code.name, "model ", code.name, ": its manifest names model ", s->manifest.model);
  s->check_target();
  ExecutorPlan plan = read_plan(code.plan, std::make_shared<StaticFunctions>(code));
  s->graph = plan.graph;
  s->check_graph();
  if (s->graph->on_cuda()) {
    s->device = Device::cuda(0);
    KILN_CHECK(cuda_available(), "model ", code.name, ": it was built for CUDA (", s->manifest.target,
               "), and this machine cannot run CUDA: ", cuda_unavailable_reason());
  }
  for (const GraphInput& in : s->graph->inputs)
    s->shapes.push_back(s->graph->shape_env->canonical(s->graph->values[size_t(in.value)].sym));
  s->compiled = make_graph_executor(std::move(plan));
  s->bind_weights(weights, from);
  s_ = std::move(s);
}

Model::~Model() = default;

const std::string& Model::name() const { return s_->name(); }

TensorList Model::run(const TensorList& inputs) const {
  const State& s = *s_;
  const Graph& g = *s.graph;
  const std::vector<ManifestInput>& declared = s.manifest.inputs;
  KILN_CHECK(inputs.size() == declared.size(), "model ", s.name(), ": takes ", declared.size(), " inputs (",
             signature(), "), got ", inputs.size());
  std::map<int, std::pair<int64_t, std::string>> sizes;  // root symbol -> its size, and where it was read
  TensorList args(g.inputs.size());
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const GraphInput& in = g.inputs[i];
    if (in.kind != InputKind::argument) {
      args[i] = s.bound[i];
      continue;
    }
    const std::string& input = declared[size_t(in.index)].name;
    const Tensor& t = inputs[size_t(in.index)];
    const Value& v = g.values[size_t(in.value)];
    KILN_CHECK(t.defined(), "model ", s.name(), ": input ", input, " is undefined");
    KILN_CHECK(t.dtype() == v.meta.dtype, "model ", s.name(), ": input ", input, " has dtype ", t.dtype(),
               "; the model was built for ", v.meta.dtype);
    KILN_CHECK(t.device() == v.meta.device, "model ", s.name(), ": input ", input, " is on ", t.device(),
               "; the model was built for ", v.meta.device);
    KILN_CHECK(t.dim() == int64_t(v.sym.size()), "model ", s.name(), ": input ", input, " has ", t.dim(),
               " dims ", to_string(t.shape()), "; the model was built for ", v.sym.size(), " (",
               to_string(v.sym), ")");
    const SymShape& sym = s.shapes[i];
    for (size_t d = 0; d < sym.size(); ++d) {
      int64_t size = t.shape()[d];
      std::string where = input + " dim " + std::to_string(d);
      if (sym[d].is_static()) {
        KILN_CHECK(size == sym[d].coeff, "model ", s.name(), ": ", where, " is ", size, "; the model was built for ",
                   sym[d].coeff, " (", to_string(v.sym), "; declare it DYNAMIC to vary it)");
        continue;
      }
      KILN_CHECK(sym[d].syms.size() == 1 && sym[d].coeff == 1 && !sym[d].opaque, "model ", s.name(), ": ", where,
                 " has size ", sym[d].str(), ", which an input's size cannot be");
      if (const DynamicRange* r = s.range(in.index, int(d)))
        KILN_CHECK(size >= r->min && size <= r->max, "model ", s.name(), ": ", where, " is ", size,
                   ", outside its declared range ", r->min, "..", r->max);
      auto [it, fresh] = sizes.emplace(sym[d].syms[0], std::make_pair(size, where));
      KILN_CHECK(fresh || it->second.first == size, "model ", s.name(), ": ", where, " is ", size, " but ",
                 it->second.second, " is ", it->second.first, "; the model needs them equal");
    }
    args[i] = t.is_contiguous() ? t : t.contiguous();
  }
  if (log_enabled(LogChannel::guards))
    for (const SizeBranch& b : s.manifest.branches) {
      int64_t size = inputs[size_t(b.input)].shape()[size_t(b.dim)];
      std::string cond = declared[size_t(b.input)].name + "." + std::to_string(b.dim) +
                         (b.modulus > 0 ? " % " + std::to_string(b.modulus) : std::string()) + " == " +
                         std::to_string(b.value);
      log_line(LogChannel::guards, "model " + s.name() + ": " + cond + (b.holds(size) ? " holds" : " does not hold") +
                                       " (" + std::to_string(size) + "): " +
                                       (b.holds(size) ? "its specialize() branches run" : "the generic code runs"));
    }
  TensorList out = s.compiled->run(args);
  // A training step's updates of its weights (and optimizer state), unless computed in place.
  for (const auto& [output, input] : g.writes) {
    Tensor weight = s.bound[size_t(input)];
    const Tensor& value = out[size_t(output)];
    if (!(value.shares_storage_with(weight) && value.data_ptr() == weight.data_ptr())) weight.copy_(value);
  }
  out.resize(size_t(s.manifest.outputs));
  return out;
}

namespace {

DType dtype_of(const halide_type_t& t, const std::string& what) {
  for (DType d : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32, DType::i64, DType::bool_})
    if (halide_buffer_type(d) == t) return d;
  throw_error(what, " has a Halide type (code ", int(t.code), ", ", int(t.bits), " bits) kiln has no dtype for");
}

// A host buffer as a tensor over the same memory: Halide's dims are innermost first.
Tensor tensor_of(const halide_buffer_t* b, const std::string& what) {
  KILN_CHECK(b && b->host, what, " is null or has no host memory (run_raw takes host buffers)");
  DType dtype = dtype_of(b->type, what);
  Shape shape;
  Strides strides;
  int64_t lowest = 0, highest = 0;
  for (int d = b->dimensions; d-- > 0;) {
    const halide_dimension_t& dim = b->dim[d];
    shape.push_back(dim.extent);
    strides.push_back(dim.stride);
    if (dim.extent > 0) (dim.stride < 0 ? lowest : highest) += int64_t(dim.extent - 1) * dim.stride;
  }
  size_t item = itemsize(dtype);
  auto storage = std::make_shared<Storage>(b->host + lowest * int64_t(item), size_t(highest - lowest + 1) * item,
                                           Device::cpu(), nullptr);  // the caller's memory
  return Tensor::make_view(std::move(storage), shape, strides, -lowest, dtype);
}

}  // namespace

void Model::run_raw(const std::vector<const halide_buffer_t*>& inputs,
                    const std::vector<halide_buffer_t*>& outputs) const {
  const Manifest& m = s_->manifest;
  TensorList in;
  for (size_t k = 0; k < inputs.size(); ++k)
    in.push_back(tensor_of(inputs[k], "model " + name() + ": input buffer " +
                                          (k < m.inputs.size() ? m.inputs[k].name : std::to_string(k)))
                     .to(s_->device));
  KILN_CHECK(outputs.size() == size_t(m.outputs), "model ", name(), ": run_raw takes ", m.outputs,
             " output buffers, got ", outputs.size());
  TensorList out = run(in);
  for (size_t k = 0; k < out.size(); ++k) {
    std::string what = "model " + name() + ": output buffer " + std::to_string(k);
    Tensor dst = tensor_of(outputs[k], what);
    KILN_CHECK(dst.dtype() == out[k].dtype() && dst.shape() == out[k].shape(), what, " is ", dst.dtype(), " ",
               to_string(dst.shape()), "; the output is ", out[k].dtype(), " ", to_string(out[k].shape()));
    dst.copy_(out[k].to(Device::cpu()));
  }
}

std::map<std::string, Tensor> Model::weights() const {
  std::map<std::string, Tensor> out;
  const Graph& g = *s_->graph;
  for (size_t i = 0; i < g.inputs.size(); ++i)
    if (g.inputs[i].kind == InputKind::captured) out[g.inputs[i].name] = s_->bound[i];
  return out;
}

std::string Model::signature() const {
  const State& s = *s_;
  const Graph& g = *s.graph;
  std::ostringstream os;
  for (size_t k = 0; k < s.manifest.inputs.size(); ++k) {
    os << (k ? "; " : "") << s.manifest.inputs[k].name << ":";
    for (size_t i = 0; i < g.inputs.size(); ++i) {
      const GraphInput& in = g.inputs[i];
      if (in.kind != InputKind::argument || in.index != int(k)) continue;
      const Value& v = g.values[size_t(in.value)];
      os << ' ' << v.meta.dtype << ' ' << to_string(s.shapes[i]);
      for (size_t d = 0; d < v.sym.size(); ++d)
        if (const DynamicRange* r = s.range(int(k), int(d)))
          os << ", dim " << d << " in " << r->min << ".." << r->max;
    }
  }
  return os.str();
}

}  // namespace kiln::aot
