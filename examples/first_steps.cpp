// First steps with kiln: tensors, views, eager ops and a small attention computation, checked
// against a plain loop.
#include <cmath>
#include <cstdio>

#include "kiln.h"

using namespace kiln;

int main() {
  manual_seed(0);
  Tensor x = randn({4, 8});                 // f32 on the CPU
  Tensor w = randn({8, 16});
  Tensor y = gelu(matmul(x, w) + 0.5);      // runs now, through generator-built kernels
  std::printf("y: %s\n", to_string(y.shape()).c_str());

  Tensor xt = x.t();                        // a view: no copy
  std::printf("x.t() shares storage: %s, contiguous: %s\n", xt.shares_storage_with(x) ? "yes" : "no",
              xt.is_contiguous() ? "yes" : "no");

  Tensor q = randn({2, 5, 8}), k = randn({2, 5, 8}), v = randn({2, 5, 8});
  Tensor att = softmax(matmul(q, k.transpose(-2, -1)) / std::sqrt(8.0), -1);
  Tensor out = matmul(att, v);              // (2, 5, 8)
  std::printf("attention rows sum to %.6f\n", att.sum({-1}).mean().item<float>());

  // The same first element by hand.
  std::vector<float> a = att.to_vector<float>(), vv = v.to_vector<float>();
  double ref = 0;
  for (int j = 0; j < 5; ++j) ref += a[j] * vv[j * 8];
  std::printf("out[0,0,0] = %.6f (by hand %.6f)\n", out.to_vector<float>()[0], ref);

  save_npy("attention.npy", att);
  std::printf("saved attention.npy: %s\n", load_npy("attention.npy").str().c_str());
  return 0;
}
