// AdamW's update of one parameter, written once for two kinds of values: kiln Tensors (the
// optimizer's composite ops, which a compiled training step traces and fuses) and Halide Exprs
// (the eager fused kernel, generators/optimizer_kernels.cpp). H holds lr, beta1, beta2, eps and
// weight_decay (doubles, or Exprs read at run time); c1 and c2 are the bias corrections
// 1 - beta^t (0-d tensors, or their Exprs).
//
//   auto [p1, m1, v1] = adamw_update(p, g, m, v, c1, c2, opts);
#pragma once
#include <array>

namespace kiln::optim {

template <typename T, typename S, typename H>
std::array<T, 3> adamw_update(const T& p, const T& g, const T& m, const T& v, const S& c1, const S& c2, const H& h) {
  T m1 = m * h.beta1 + g * (1 - h.beta1);
  T v1 = v * h.beta2 + g * g * (1 - h.beta2);
  T update = (m1 / c1) / (sqrt(v1 / c2) + h.eps);
  T p1 = p * (1 - h.lr * h.weight_decay) - update * h.lr;
  return {p1, m1, v1};
}

}  // namespace kiln::optim
