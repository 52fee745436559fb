#include "graph/check_op.h"

#include <cmath>
#include <cstring>
#include <random>
#include <sstream>

#include "autograd/derivatives.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "dsl/creation.h"
#include "dsl/cuda/cuda_api.h"
#include "dsl/custom_op.h"
#include "dsl/dispatch.h"
#include "dsl/error.h"
#include "dsl/functions.h"
#include "graph/compile.h"

namespace kiln {

namespace {

std::vector<double> host_f64(const Tensor& t) {
  Tensor h = t.to(Device::cpu()).to(f64).contiguous();
  const double* p = h.data<double>();
  return {p, p + h.numel()};
}

std::string meta_str(const Tensor& t) { return to_string(metas_of({t})[0]); }

// Raw bytes of t (on the host), to see whether a call wrote them.
std::vector<unsigned char> bytes_of(const Tensor& t) {
  Tensor h = t.to(Device::cpu()).contiguous();
  const auto* p = static_cast<const unsigned char*>(h.data_ptr());
  return {p, p + h.numel() * int64_t(itemsize(h.dtype()))};
}

struct Tolerance {
  double rtol, atol;
};
Tolerance tolerance_of(DType t, const OpCheckOptions& o) {
  if (o.rtol > 0 || o.atol > 0) return {o.rtol, o.atol};
  if (t == f64) return {1e-10, 1e-12};
  if (t == f16 || t == bf16) return {1e-2, 1e-3};
  return {1e-5, 1e-6};
}

// Empty when `got` matches `want` (shape, dtype, values within tolerance); else what differs.
std::string difference(const Tensor& got, const Tensor& want, const OpCheckOptions& o) {
  if (!got.defined() || !want.defined())
    return got.defined() == want.defined() ? "" : (got.defined() ? "an extra tensor" : "a missing tensor");
  if (got.shape() != want.shape() || got.dtype() != want.dtype())
    return meta_str(got) + " against " + meta_str(want);
  std::vector<double> a = host_f64(got), b = host_f64(want);
  Tolerance t = tolerance_of(want.dtype(), o);
  for (size_t i = 0; i < a.size(); ++i) {
    bool both_nan = std::isnan(a[i]) && std::isnan(b[i]);
    if (!both_nan && !(std::abs(a[i] - b[i]) <= t.atol + t.rtol * std::abs(b[i]))) {
      std::ostringstream s;
      s << "element " << i << ": " << a[i] << " against " << b[i] << " (rtol " << t.rtol << ", atol " << t.atol << ")";
      return s.str();
    }
  }
  return "";
}

class Checker {
 public:
  Checker(const OpDef& op, const OpCheckOptions& o, OpCheckReport& r) : op_(op), o_(o), r_(r) {}

  void sample(int i, const OpSample& s) {
    i_ = i;
    TensorList eager;
    if (!run("shape_rule", [&] { eager = eager_outputs(s); })) return;
    run("no_input_writes", [&] { no_input_writes(s); });
    for (bool dynamic : {false, true})
      run(dynamic ? "compiled_dynamic" : "compiled", [&] { compiled(s, eager, dynamic); });
    if (!differentiable(s)) {
      r_.skipped.push_back(label("autograd") + ": no float input, or the op is not differentiable");
    } else {
      run("autograd", [&] { autograd(s); });
      run("gradcheck", [&] { gradcheck_f64(s); });
    }
    run("cpu_vs_cuda", [&] { cpu_vs_cuda(s, eager); });
  }

 private:
  const OpDef& op_;
  const OpCheckOptions& o_;
  OpCheckReport& r_;
  int i_ = 0;
  bool skipped_ = false;

  std::string label(const std::string& check) const { return check + " (sample " + std::to_string(i_) + ")"; }

  // Runs one check: a kiln::Error (or any exception) inside is its failure.
  template <typename F>
  bool run(const std::string& check, F&& f) {
    skipped_ = false;
    try {
      f();
    } catch (const std::exception& e) {
      r_.failures.push_back({check, i_, e.what()});
      return false;
    }
    if (!skipped_) r_.passed.push_back(label(check));
    return true;
  }
  void skip(const std::string& check, const std::string& why) {
    skipped_ = true;
    r_.skipped.push_back(label(check) + ": " + why);
  }

  TensorList call(const TensorList& in, const Attrs& a) const {
    NoGradGuard no_grad;
    return dispatch(op_, in, a);
  }

  TensorList eager_outputs(const OpSample& s) {
    std::vector<TensorMeta> want = op_.infer(metas_of(s.inputs), s.attrs);
    TensorList out = call(s.inputs, s.attrs);
    KILN_CHECK(out.size() == want.size(), out.size(), " outputs, the shape rule says ", want.size());
    std::vector<TensorMeta> got = metas_of(out);
    for (size_t k = 0; k < out.size(); ++k)
      KILN_CHECK(got[k] == want[k], "output ", k, " is ", to_string(got[k]), ", the shape rule says ", to_string(want[k]));
    return out;
  }

  void no_input_writes(const OpSample& s) {
    std::vector<std::vector<unsigned char>> before;
    for (const Tensor& t : s.inputs) before.push_back(bytes_of(t));
    call(s.inputs, s.attrs);
    for (size_t k = 0; k < s.inputs.size(); ++k) {
      std::vector<unsigned char> after = bytes_of(s.inputs[k]);
      KILN_CHECK(after == before[k], "input ", k, " (", meta_str(s.inputs[k]),
                 ") was written by the call; a custom op writes only its own outputs");
    }
  }

  // compile() of the op alone with the sample's attributes (fullgraph: a graph break fails).
  CompiledFunction<TensorList(TensorList)> compiled_op(const OpSample& s, std::optional<bool> dynamic,
                                                       const std::string& what) const {
    const OpDef& op = op_;
    Attrs attrs = s.attrs;
    return compile([&op, attrs](TensorList in) { return dispatch(op, in, attrs); },
                   {.backend = o_.backend, .fullgraph = true, .dynamic = dynamic, .name = "check_op " + op_.name + what});
  }

  void compiled(const OpSample& s, const TensorList& eager, bool dynamic) {
    auto f = compiled_op(s, dynamic, dynamic ? " (dynamic)" : "");
    NoGradGuard no_grad;
    TensorList got = f(s.inputs);
    KILN_CHECK(got.size() == eager.size(), got.size(), " outputs compiled, ", eager.size(), " eagerly");
    for (size_t k = 0; k < got.size(); ++k) {
      std::string d = difference(got[k], eager[k], o_);
      KILN_CHECK(d.empty(), "output ", k, " compiled against eager: ", d);
    }
  }

  bool differentiable(const OpSample& s) const {
    if (!is_differentiable(op_)) return false;
    for (const Tensor& t : s.inputs)
      if (is_floating(t.dtype())) return true;
    return false;
  }

  // The inputs as leaves (float ones asking for a gradient), in `t` where given.
  TensorList leaves(const TensorList& in, std::optional<DType> t = std::nullopt) const {
    TensorList out;
    for (const Tensor& x : in) {
      Tensor c = (t && is_floating(x.dtype()) ? x.to(*t) : x).detach().clone();
      if (is_floating(c.dtype())) c.requires_grad_();
      out.push_back(c);
    }
    return out;
  }

  // sum over outputs of <output, weight>: one scalar whose gradient reaches every output.
  static Tensor projection(const TensorList& outs, const TensorList& weights) {
    Tensor loss;
    for (size_t k = 0; k < outs.size(); ++k) {
      if (!is_floating(outs[k].dtype())) continue;
      Tensor term = (outs[k] * weights[k]).sum();
      loss = loss.defined() ? loss + term : term;
    }
    return loss;
  }

  // Fixed pseudo-random weights in [-1, 1] (kiln's random stream is left alone).
  TensorList weights_for(const TensorList& outs) const {
    TensorList w;
    std::mt19937_64 gen(uint64_t(1000 + i_));
    std::uniform_real_distribution<double> u(-1, 1);
    for (const Tensor& o : outs) {
      if (!is_floating(o.dtype())) {
        w.push_back(Tensor());
        continue;
      }
      std::vector<double> v(size_t(o.numel()));
      for (double& x : v) x = u(gen);
      w.push_back(from_vector<double>(v, o.shape()).to(o.dtype()).to(o.device()));
    }
    return w;
  }

  void autograd(const OpSample& s) {
    TensorList in = leaves(s.inputs);
    TensorList outs = dispatch(op_, in, s.attrs);
    TensorList w = weights_for(outs);
    Tensor loss = projection(outs, w);
    KILN_CHECK(loss.defined(), "no float output to take a gradient of");
    loss.backward();
    TensorList eager_grads;
    for (size_t k = 0; k < in.size(); ++k) {
      if (!is_floating(in[k].dtype())) {
        eager_grads.push_back(Tensor());
        continue;
      }
      Tensor g = in[k].grad();
      KILN_CHECK(g.defined(), "input ", k, " (", meta_str(in[k]), ") got no gradient from the derivative rule");
      KILN_CHECK(g.shape() == in[k].shape() && g.dtype() == in[k].dtype(), "input ", k, " is ", meta_str(in[k]),
                 " but its gradient is ", meta_str(g));
      eager_grads.push_back(g);
    }
    // The rule traced into a compiled training step's backward graph.
    auto f = compiled_op(s, std::nullopt, " (backward)");
    TensorList cin = leaves(s.inputs);
    Tensor closs = projection(f(cin), w);
    closs.backward();
    for (size_t k = 0; k < cin.size(); ++k) {
      if (!eager_grads[k].defined()) continue;
      std::string d = difference(cin[k].grad(), eager_grads[k], o_);
      KILN_CHECK(d.empty(), "the gradient of input ", k, " compiled against eager: ", d);
    }
  }

  // On the CPU (gradcheck perturbs elements on the host): a CUDA sample's inputs are moved there
  // when the op has a CPU kernel (the rule is the same Tensor ops on either device).
  void gradcheck_f64(const OpSample& s) {
    TensorList host = s.inputs;
    if (s.inputs[0].device().is_cuda()) {
      if (!op_.custom || !op_.custom->has_cpu_kernel())
        return skip("gradcheck", "the op has no CPU kernel, and finite differences run on the host");
      for (Tensor& t : host) t = t.to(Device::cpu());
    }
    TensorList in = leaves(host, f64);
    try {
      op_.infer(metas_of(in), s.attrs);
    } catch (const Error& e) {
      skip("gradcheck", std::string("its shape rule rejects f64 inputs: ") + e.what());
      return;
    }
    const OpDef& op = op_;
    Attrs attrs = s.attrs;
    TensorList w;
    auto fn = [&](const TensorList& x) {
      TensorList outs = dispatch(op, x, attrs);
      if (w.empty()) {
        NoGradGuard no_grad;
        w = weights_for(outs);
      }
      return projection(outs, w);
    };
    GradcheckResult g = gradcheck(fn, in);
    KILN_CHECK(g.ok, "the derivative rule against central differences in f64: ", g.message);
  }

  void cpu_vs_cuda(const OpSample& s, const TensorList& eager) {
    const CustomOp* c = op_.custom;
    if (!c || !c->has_cpu_kernel() || !c->has_cuda_kernel()) return skip("cpu_vs_cuda", "the op has one kernel");
    if (!cuda_available()) return skip("cpu_vs_cuda", "no GPU");
    bool on_cuda = s.inputs[0].device().is_cuda();
    TensorList moved;
    for (const Tensor& t : s.inputs) moved.push_back(t.to(on_cuda ? Device::cpu() : Device::cuda()));
    TensorList other = call(moved, s.attrs);
    for (size_t k = 0; k < other.size(); ++k) {
      std::string d = difference(other[k].to(eager[k].device()), eager[k], o_);
      KILN_CHECK(d.empty(), "output ", k, " on ", on_cuda ? "the CPU" : "CUDA", " against ",
                 on_cuda ? "CUDA" : "the CPU", ": ", d);
    }
  }
};

}  // namespace

std::string OpCheckReport::text() const {
  std::ostringstream s;
  for (const OpCheckFailure& f : failures) s << f.check << " (sample " << f.sample << "): " << f.what << "\n";
  s << passed.size() << " checks passed, " << failures.size() << " failed, " << skipped.size() << " skipped\n";
  return s.str();
}

bool OpCheckReport::failed(const std::string& check) const {
  for (const OpCheckFailure& f : failures)
    if (f.check == check) return true;
  return false;
}

OpCheckReport check_op(const OpDef& op, const std::vector<OpSample>& samples, const OpCheckOptions& options) {
  KILN_CHECK(!samples.empty(), "check_op: ", op.name, ": give at least one sample");
  OpCheckReport report;
  Checker checker(op, options, report);
  for (size_t i = 0; i < samples.size(); ++i) checker.sample(int(i), samples[i]);
  return report;
}

}  // namespace kiln
