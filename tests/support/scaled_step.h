// Test support: one mixed-precision training step as PyTorch's recipe writes it, shared by the
// CPU and CUDA suites of autocast and GradScaler: forward and loss under autocast, backward of
// the scaled loss, the scaler's unscale, skip and update, the optimizer's step and zero_grad.
#pragma once
#include <limits>
#include <vector>

#include "support/reference.h"

namespace kiln::test {

inline Tensor scaled_step(nn::MLP& m, optim::Optimizer& opt, optim::GradScaler& scaler, const Tensor& x,
                          const Tensor& y, Device device, DType autocast) {
  Tensor loss;
  {
    AutocastGuard ac(device, autocast);
    loss = cross_entropy(m.forward(x), y);
  }
  scaler.scale(loss).backward();
  scaler.step(opt);
  scaler.update();
  opt.zero_grad();
  return loss;
}

// The inputs of step `i` ([8, 12] f32 on the CPU, seed 20 + i); step 2's hold an inf, which the
// scaler must skip.
inline Tensor scaled_step_input(int i) {
  Tensor x = random_tensor({8, 12}, DType::f32, 20 + uint64_t(i));
  if (i != 2) return x;
  std::vector<float> v;
  for (double e : host_values(x)) v.push_back(float(e));
  v[5] = std::numeric_limits<float>::infinity();
  return from_vector<float>(v, {8, 12});
}

}  // namespace kiln::test
