#include "graph/halide_op.h"

#include <map>
#include <memory>
#include <mutex>

#include "autograd/derivatives.h"
#include "dsl/dispatch.h"
#include "dsl/error.h"
#include "dsl/halide_adjoint.h"
#include "dsl/ops/op_tables.h"
#include "graph/compile.h"

namespace kiln {

namespace {

// add()'s rule (the pointwise op tables'): broadcast shapes, the result type, one device.
std::vector<TensorMeta> broadcast_rule(const std::string& op, const std::vector<TensorMeta>& in) {
  return {{broadcast_all(op, in), result_type(in), common_device(op, in)}};
}

// The eager kernel: the op alone, compiled with the halide backend, one compiled function per
// input dtypes, ranks, device and attributes (the compile cache and its guards take the sizes).
class EagerPipelines {
 public:
  TensorList run(const OpDef& def, const TensorList& inputs, const Attrs& attrs) {
    thread_local bool running = false;
    KILN_CHECK(!running, def.name, ": its eager pipeline ran the op through its kernel again (the compiled "
               "function fell back to eager execution)");
    std::string key = def.name + "(" + attrs.str() + ")";
    for (const Tensor& t : inputs) key += " " + std::string(name(t.dtype())) + "/" + std::to_string(t.dim()) + "/" + t.device().str();
    Entry* e;
    {
      std::lock_guard<std::mutex> lock(mu_);
      std::unique_ptr<Entry>& slot = entries_[key];
      if (!slot) {
        CompileOptions options;
        options.backend = "halide";
        options.fullgraph = true;
        options.recompile_limit = 1 << 20;  // sizes only: after the first change they are symbolic
        options.name = def.name;
        slot = std::make_unique<Entry>(
            [&def, attrs](const TensorList& t, const std::vector<AttrValue>&) { return dispatch(def, t, attrs); },
            options);
      }
      e = slot.get();
    }
    std::lock_guard<std::mutex> lock(e->mu);
    running = true;
    struct Reset {
      bool& r;
      ~Reset() { r = false; }
    } reset{running};
    return e->core.call(inputs, {});
  }

 private:
  struct Entry {
    Entry(detail::TracedFn fn, CompileOptions options) : core(std::move(fn), std::move(options)) {}
    std::mutex mu;
    detail::CompiledCore core;
  };
  std::mutex mu_;
  std::map<std::string, std::unique_ptr<Entry>> entries_;
};

EagerPipelines& eager_pipelines() {
  static EagerPipelines p;
  return p;
}

// The op computing dy * dy/dx_input of `forward` (registered once, on first use).
const OpDef& adjoint_op(const std::string& forward, int input) {
  static std::mutex mu;
  static std::map<std::pair<std::string, int>, const OpDef*> made;
  std::lock_guard<std::mutex> lock(mu);
  const OpDef*& def = made[{forward, input}];
  if (def) return *def;
  const OpDef& f = op_def(forward);
  const int n = f.num_inputs;
  HalideOp b;
  b.name = forward + "_grad" + std::to_string(input);
  b.num_inputs = n + 1;
  b.pointwise = [fwd = f.pointwise, input, n, name = f.name](const std::vector<Halide::Expr>& v, const Attrs& a) {
    return pointwise_adjoint(fwd, std::vector<Halide::Expr>(v.begin(), v.begin() + n), v[size_t(n)], input, a, name);
  };
  // The forward's broadcast shape, in the dtype the forward computes in (the rule casts it to the
  // input's dtype after reducing it to the input's shape).
  b.shape = [name = b.name, n](const std::vector<TensorMeta>& in, const Attrs&) {
    std::vector<TensorMeta> out = broadcast_rule(name, in);
    out[0].dtype = broadcast_rule(name, std::vector<TensorMeta>(in.begin(), in.begin() + n))[0].dtype;
    return out;
  };
  def = &register_halide_op(std::move(b));
  return *def;
}

DerivativeRule adjoint_rule(const std::string& forward) {
  return [forward](const TensorList& inputs, const TensorList&, const TensorList& grads, const Attrs& attrs,
                   const std::vector<bool>& needed) {
    TensorList dx(inputs.size());
    if (!grads.at(0).defined()) return dx;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!needed[i] || !is_floating(inputs[i].dtype())) continue;
      TensorList args = inputs;
      args.push_back(grads[0]);
      Tensor d = dispatch(adjoint_op(forward, int(i)), args, attrs)[0];
      d = sum_to(d, inputs[i].shape());
      dx[i] = d.dtype() == inputs[i].dtype() ? d : d.to(inputs[i].dtype());
    }
    return dx;
  };
}

}  // namespace

const OpDef& register_halide_op(HalideOp op) {
  KILN_CHECK(bool(op.pointwise), "register_halide_op: ", op.name, " has no definition (HalideOp::pointwise)");
  KILN_CHECK(op.differentiable || !op.backward, "register_halide_op: ", op.name,
             " is marked non-differentiable but has a derivative rule");
  CustomOp c;
  c.name = op.name;
  c.num_inputs = op.num_inputs;
  c.shape = op.shape ? std::move(op.shape) : [name = op.name](const std::vector<TensorMeta>& in, const Attrs&) {
    return broadcast_rule(name, in);
  };
  c.cpu = c.cuda = [name = op.name](const TensorList& in, const Attrs& a) {
    return eager_pipelines().run(op_def(name), in, a);
  };
  c.differentiable = op.differentiable;
  c.backward = op.backward || !op.differentiable ? std::move(op.backward) : adjoint_rule(op.name);
  c.pointwise = std::move(op.pointwise);
  return register_op(std::move(c));
}

}  // namespace kiln
