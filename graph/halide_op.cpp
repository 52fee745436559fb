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
    std::string key = def.name + "(" + attrs.str() + ")", types;
    for (const Tensor& t : inputs) {
      key += " " + std::string(name(t.dtype())) + "/" + std::to_string(t.dim()) + "/" + t.device().str();
      types += (types.empty() ? "" : ", ") + std::string(name(t.dtype())) + "[" + std::to_string(t.dim()) + "d]";
    }
    Entry* e;
    {
      std::lock_guard<std::mutex> lock(mu_);
      std::unique_ptr<Entry>& slot = entries_[key];
      if (!slot) {
        CompileOptions options;
        options.backend = "halide";
        options.fullgraph = true;
        options.recompile_limit = 1 << 20;  // sizes only: after the first change they are symbolic
        // Named by the inputs' types too: each entry numbers its graphs from 1, and the debug
        // dump (KILN_DEBUG_DIR) names its files by the compile's name and that number.
        options.name = def.name + " (eager, " + types + (inputs.empty() ? "" : ", " + inputs[0].device().str()) + ")";
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

// How a definition over whole tensors sees its inputs' edges: each input is extended past them by
// its nearest element, so a stencil's reads stay inside the tensors it was given. The op's own
// pipeline marks the clamps likely(), as Halide's repeat_edge does: loop partitioning then gives
// each loop a steady state without them (with symbolic sizes, plain clamps stayed in the inner loop
// as gathers, and RMSNorm over tensors ran 6x slower than at fixed sizes). Its gradient's
// definition (propagate_adjoints) takes plain clamps: through likely() ones, Halide 14 dropped the
// scatter loop when the sizes were symbolic (weighted_sumsq's dw came out zero).
enum class Edges { likely, plain };

std::vector<HalideTensor> with_edges(const std::vector<HalideTensor>& in, Edges edges) {
  std::vector<HalideTensor> out;
  for (const HalideTensor& t : in) {
    if (t.rank() == 0) {
      out.push_back(t);
      continue;
    }
    std::vector<Halide::Var> v = halide_vars(t.rank());
    std::vector<Halide::Expr> at;
    for (int d = 0; d < t.rank(); ++d) {
      Halide::Expr i = edges == Edges::likely ? Halide::likely(v[size_t(d)]) : Halide::Expr(v[size_t(d)]);
      at.push_back(Halide::clamp(i, 0, t.shape[size_t(t.rank() - 1 - d)] - 1));
    }
    Halide::Func edged(t.func.name() + "_edges");
    edged(v) = t.func(at);
    out.push_back({edged, t.shape, t.dtype});
  }
  return out;
}

// A user's definition over whole tensors with its inputs' edges: one output of the rank the Funcs
// say.
HalideDef edged(HalideDef user, std::string name, Edges edges) {
  return [user = std::move(user), name = std::move(name), edges](const std::vector<HalideTensor>& in, const Attrs& a) {
    std::vector<HalideTensor> out = user(with_edges(in, edges), a);
    KILN_CHECK(out.size() == 1, name, ": its definition gave ", out.size(), " outputs; a Halide op has one");
    KILN_CHECK(out[0].func.defined() && out[0].func.outputs() == 1, name,
               ": its definition's output is not a defined Func of one value");
    KILN_CHECK(out[0].func.dimensions() == out[0].rank(), name, ": its definition's output Func has ",
               out[0].func.dimensions(), " dims but a shape of ", out[0].rank());
    return out;
  };
}

// The op computing dy * dy/dx_input of `forward` (registered once, on first use); `plain` is
// forward's definition over whole tensors with plain edges (none for a pointwise op).
const OpDef& adjoint_op(const std::string& forward, int input, const HalideDef& plain) {
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
  if (f.define) {  // whole tensors: propagate_adjoints of the (edged) definition over the inputs
    b.define = [fwd = plain, input, n, name = f.name](const std::vector<HalideTensor>& in, const Attrs& a) {
      // Each input through a Func of its own: propagate_adjoints gives adjoints of Funcs, and an
      // input may reach the definition as a pipeline's buffer.
      std::vector<HalideTensor> x;
      for (int k = 0; k < n; ++k) {
        std::vector<Halide::Var> v = halide_vars(in[size_t(k)].rank());
        Halide::Func own("input" + std::to_string(k));
        own(v) = in[size_t(k)].func(v);
        x.push_back({own, in[size_t(k)].shape, in[size_t(k)].dtype});
      }
      HalideTensor y = fwd(x, a)[0];
      const HalideTensor& x_i = x[size_t(input)];
      return std::vector<HalideTensor>{{tensor_adjoint(y, in[size_t(n)], x_i, name), x_i.shape, x_i.dtype}};
    };
    b.shape = [name = b.name, input](const std::vector<TensorMeta>& in, const Attrs&) {
      return std::vector<TensorMeta>{in.at(size_t(input))};
    };
    def = &register_halide_op(std::move(b));
    return *def;
  }
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

DerivativeRule adjoint_rule(const std::string& forward, HalideDef plain) {
  return [forward, plain = std::move(plain)](const TensorList& inputs, const TensorList&, const TensorList& grads, const Attrs& attrs,
                   const std::vector<bool>& needed) {
    TensorList dx(inputs.size());
    if (!grads.at(0).defined()) return dx;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!needed[i] || !is_floating(inputs[i].dtype())) continue;
      TensorList args = inputs;
      args.push_back(grads[0]);
      Tensor d = dispatch(adjoint_op(forward, int(i), plain), args, attrs)[0];
      d = sum_to(d, inputs[i].shape());
      dx[i] = d.dtype() == inputs[i].dtype() ? d : d.to(inputs[i].dtype());
    }
    return dx;
  };
}

}  // namespace

const OpDef& register_halide_op(HalideOp op) {
  KILN_CHECK(op.pointwise || op.define, "register_halide_op: ", op.name,
             " has no definition (HalideOp::pointwise or HalideOp::define)");  // both: register_op says so
  KILN_CHECK(!op.define || op.shape, "register_halide_op: ", op.name,
             " is defined over whole tensors (HalideOp::define) and needs a shape rule (HalideOp::shape)");
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
  HalideDef plain;
  if (op.define) {
    plain = edged(op.define, op.name, Edges::plain);
    c.define = edged(std::move(op.define), op.name, Edges::likely);
  }
  c.differentiable = op.differentiable;
  c.backward = op.backward || !op.differentiable ? std::move(op.backward) : adjoint_rule(op.name, std::move(plain));
  c.pointwise = std::move(op.pointwise);
  return register_op(std::move(c));
}

}  // namespace kiln
