// Built against an installed kiln (find_package(kiln), kiln::kiln): a Linear, GELU, Linear model
// runs eagerly against plain loops in double, then under kiln::compile against eager. Exits
// non-zero on any difference beyond f32 rounding.
#include <cmath>
#include <cstdio>
#include <vector>

#include "kiln.h"

using namespace kiln;

namespace {

// y = x W^T + b in double over row-major values.
std::vector<double> linear(const std::vector<double>& x, int64_t rows, const Tensor& w, const Tensor& b) {
  int64_t out = w.shape()[0], in = w.shape()[1];
  std::vector<float> wv = w.to_vector<float>(), bv = b.to_vector<float>();
  std::vector<double> y(size_t(rows * out));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double acc = bv[size_t(o)];
      for (int64_t i = 0; i < in; ++i) acc += x[size_t(r * in + i)] * wv[size_t(o * in + i)];
      y[size_t(r * out + o)] = acc;
    }
  return y;
}

double max_difference(const std::vector<float>& a, const std::vector<double>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(double(a[i]) - b[i]));
  return worst;
}

}  // namespace

int main() {
  manual_seed(7);
  const int64_t rows = 6, width = 8, hidden = 16, out = 4;
  nn::Linear first(width, hidden), second(hidden, out);
  auto model = [&](const Tensor& x) { return second.forward(gelu(first.forward(x))); };
  Tensor x = randn({rows, width});

  std::vector<float> xv = x.to_vector<float>();
  std::vector<double> h = linear(std::vector<double>(xv.begin(), xv.end()), rows, first.weight, first.bias);
  for (double& v : h) v = 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
  std::vector<double> reference = linear(h, rows, second.weight, second.bias);

  Tensor eager = model(x);
  auto compiled = compile(model);
  Tensor y = compiled(x);
  double eager_error = max_difference(eager.to_vector<float>(), reference);
  std::vector<float> ev = eager.to_vector<float>();
  double compiled_error = max_difference(y.to_vector<float>(), std::vector<double>(ev.begin(), ev.end()));
  std::printf("eager vs double loops: max |difference| %.3g\ncompiled vs eager: max |difference| %.3g\n", eager_error,
              compiled_error);
  bool ok = eager.shape() == Shape{rows, out} && y.shape() == eager.shape() && eager_error < 1e-4 && compiled_error < 1e-4;
  std::printf("%s\n", ok ? "kiln works from its installed package" : "MISMATCH");
  return ok ? 0 : 1;
}
