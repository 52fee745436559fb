// gradcheck: compares the analytic gradients that backward() computes with central finite
// differences in f64, through a random projection of the output (v . dfn/dx).
//
//   Tensor x = randn({3, 4}, {.dtype = f64}).requires_grad_();
//   GradcheckResult r = gradcheck([](const TensorList& in) { return tanh(in[0]); }, {x});
//   if (!r.ok) std::puts(r.message.c_str());
#pragma once
#include <functional>
#include <string>

#include "dsl/tensor.h"

namespace kiln {

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-5;
  double rtol = 1e-3;
  uint64_t seed = 0;  // of the output projection
};

struct GradcheckResult {
  bool ok = true;
  std::string message;  // the first mismatches: input, element, analytic and numeric values
};

// `inputs` must be f64 CPU tensors; those that require grad are checked (each element perturbed in place
// and restored). Inputs with stride-0 (expanded) dims are rejected: one memory element would
// stand for several tensor elements.
GradcheckResult gradcheck(const std::function<Tensor(const TensorList&)>& fn, const TensorList& inputs,
                          const GradcheckOptions& opts = {});

}  // namespace kiln
