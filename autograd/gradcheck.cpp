#include "autograd/gradcheck.h"

#include <cmath>
#include <random>
#include <sstream>

#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "dsl/creation.h"
#include "dsl/error.h"

namespace kiln {

namespace {

// Storage offsets (in elements) of a tensor's elements in row-major order.
std::vector<int64_t> element_offsets(const Tensor& t) {
  std::vector<int64_t> offs;
  std::vector<int64_t> idx(t.shape().size(), 0);
  for (int64_t n = 0; n < t.numel(); ++n) {
    int64_t off = t.storage_offset();
    for (size_t d = 0; d < idx.size(); ++d) off += idx[d] * t.strides()[d];
    offs.push_back(off);
    for (size_t d = idx.size(); d-- > 0;) {
      if (++idx[d] < t.shape()[d]) break;
      idx[d] = 0;
    }
  }
  return offs;
}

double projected(const Tensor& out, const std::vector<double>& v) {
  std::vector<double> o = out.to_vector<double>();
  double s = 0;
  for (size_t i = 0; i < o.size(); ++i) s += o[i] * v[i];
  return s;
}

}  // namespace

GradcheckResult gradcheck(const std::function<Tensor(const TensorList&)>& fn, const TensorList& inputs,
                          const GradcheckOptions& opts) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    KILN_CHECK(inputs[i].dtype() == DType::f64, "gradcheck: input ", i, " has dtype ", inputs[i].dtype(),
               "; finite differences need f64");
    KILN_CHECK(inputs[i].device().is_cpu(), "gradcheck: input ", i, " is on ", inputs[i].device(),
               "; it perturbs elements on the host: pass CPU tensors");
    for (int64_t d = 0; d < inputs[i].dim(); ++d)
      KILN_CHECK(inputs[i].stride(d) != 0 || inputs[i].size(d) <= 1, "gradcheck: input ", i,
                 " is expanded (stride 0 in dim ", d, "); pass a materialized tensor");
  }
  Tensor out = fn(inputs);
  KILN_CHECK(out.dtype() == DType::f64, "gradcheck: the output has dtype ", out.dtype(), "; expected f64");
  std::mt19937_64 gen(opts.seed);
  std::normal_distribution<double> normal;
  std::vector<double> v(size_t(out.numel()));
  for (double& e : v) e = normal(gen);
  for (const Tensor& x : inputs)
    if (x.requires_grad() && x.is_leaf()) x.impl().autograd->grad = Tensor();
  out.backward(from_vector(v, out.shape()));

  GradcheckResult r;
  std::ostringstream msg;
  int bad = 0;
  NoGradGuard no_grad;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& x = inputs[i];
    if (!x.requires_grad()) continue;
    Tensor g = x.grad();
    std::vector<double> analytic = g.defined() ? g.to_vector<double>() : std::vector<double>(size_t(x.numel()), 0.0);
    auto* data = static_cast<double*>(x.storage()->data);
    std::vector<int64_t> offs = element_offsets(x);
    for (size_t j = 0; j < offs.size(); ++j) {
      double saved = data[offs[j]];
      data[offs[j]] = saved + opts.eps;
      double plus = projected(fn(inputs), v);
      data[offs[j]] = saved - opts.eps;
      double minus = projected(fn(inputs), v);
      data[offs[j]] = saved;
      double numeric = (plus - minus) / (2 * opts.eps);
      if (!(std::abs(numeric - analytic[j]) <= opts.atol + opts.rtol * std::abs(numeric))) {
        if (bad++ < 5)
          msg << "input " << i << " element " << j << ": analytic " << analytic[j] << ", numeric " << numeric << "\n";
      }
    }
  }
  r.ok = bad == 0;
  if (bad) msg << bad << " mismatches";
  r.message = msg.str();
  return r;
}

}  // namespace kiln
