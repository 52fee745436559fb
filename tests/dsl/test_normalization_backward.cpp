// The fused backward ops that eager autograd runs for softmax, log_softmax, layer_norm and
// cross_entropy, against plain double loops on fresh random inputs: rows along every dim,
// non-contiguous views, sizes that reach the vectorized and parallel paths, f16, and the autograd
// rules that call them (a backward through the tape gives the reference gradient).
#include <cmath>

#include "dsl/dispatch.h"
#include "support/reference.h"

using namespace kiln;
using namespace kiln::test;

namespace {

using Values = std::vector<double>;

Values softmax_backward_ref(const Values& y, const Values& g) {
  double s = 0;
  for (size_t i = 0; i < y.size(); ++i) s += g[i] * y[i];
  Values r;
  for (size_t i = 0; i < y.size(); ++i) r.push_back(y[i] * (g[i] - s));
  return r;
}

Values log_softmax_backward_ref(const Values& y, const Values& g) {
  double s = 0;
  for (double e : g) s += e;
  Values r;
  for (size_t i = 0; i < y.size(); ++i) r.push_back(g[i] - std::exp(y[i]) * s);
  return r;
}

Tensor run(const char* op, const TensorList& in, const Attrs& a) { return dispatch(op_def(op), in, a)[0]; }

// softmax output of x along dim: a valid y (rows of positive values summing to 1).
void check_rows_backward(const Tensor& x, const Tensor& g, int64_t dim, const std::string& what) {
  DType t = x.dtype() == f64 ? f64 : f32;
  Tolerance tol = tolerance(x.dtype());
  if (t == f32) tol.atol = std::max(tol.atol, 1e-5);
  Tensor y = softmax(x, dim);
  Tensor dx = run("softmax_backward", {y, g}, {{"dim", dim}});
  BOOST_TEST(dx.dtype() == y.dtype());
  check_close(dx, along_dim(y, g, dim, softmax_backward_ref), x.shape(), tol, "softmax_backward " + what);
  Tensor ly = log_softmax(x, dim);
  Tensor ldx = run("log_softmax_backward", {ly, g}, {{"dim", dim}});
  check_close(ldx, along_dim(ly, g, dim, log_softmax_backward_ref), x.shape(), tol, "log_softmax_backward " + what);
}

}  // namespace

BOOST_AUTO_TEST_CASE(softmax_backward_ops_match_reference) {
  uint64_t seed = 1100;
  const std::vector<std::pair<Shape, int64_t>> cases = {
      {{7}, 0}, {{4, 10}, -1}, {{4, 10}, 0}, {{2, 3, 5}, 1}, {{300, 1100}, -1}, {{33, 4096}, 1}, {{1000, 8}, 0}};
  for (DType t : {f32, f64}) {
    for (const auto& [shape, dim] : cases) {
      Tensor x = random_tensor(shape, t, seed++, -4, 4), g = random_tensor(shape, t, seed++);
      check_rows_backward(x, g, dim, std::string(name(t)) + " " + to_string(shape) + " dim " + std::to_string(dim));
    }
  }
  // Views: a transposed output gradient, and f16 through the f32 kernel.
  Tensor x = random_tensor({12, 40}, f32, seed++, -3, 3), g = random_tensor({40, 12}, f32, seed++).transpose(0, 1);
  check_rows_backward(x, g, -1, "transposed gradient");
  check_rows_backward(random_tensor({6, 50}, f16, seed++), random_tensor({6, 50}, f16, seed++), -1, "f16");
}

namespace {

// x's gradient of layer_norm over the last `normalized` elements of each row, in double.
Values layer_norm_backward_ref(const Tensor& x, const Tensor& g, int64_t normalized, const Tensor& w, double eps) {
  Values v = host_values(x), gv = host_values(g), wv = w.defined() ? host_values(w) : Values(), out(v.size());
  auto n = size_t(normalized);
  for (size_t row = 0; row < v.size() / n; ++row) {
    const double *p = v.data() + row * n, *q = gv.data() + row * n;
    double mean = 0, var = 0;
    for (size_t i = 0; i < n; ++i) mean += p[i];
    mean /= double(n);
    for (size_t i = 0; i < n; ++i) var += (p[i] - mean) * (p[i] - mean);
    double rstd = 1 / std::sqrt(var / double(n) + eps);
    Values xhat(n), gxhat(n);
    double sum_g = 0, sum_gx = 0;
    for (size_t i = 0; i < n; ++i) {
      xhat[i] = (p[i] - mean) * rstd;
      gxhat[i] = q[i] * (wv.empty() ? 1.0 : wv[i]);
      sum_g += gxhat[i];
      sum_gx += gxhat[i] * xhat[i];
    }
    for (size_t i = 0; i < n; ++i)
      out[row * n + i] = rstd * (gxhat[i] - sum_g / double(n) - xhat[i] * sum_gx / double(n));
  }
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(layer_norm_backward_op_matches_reference) {
  uint64_t seed = 1200;
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{10}, {10}}, {{4, 10}, {10}}, {{2, 3, 8}, {3, 8}}, {{2, 3, 8}, {8}}, {{512, 768}, {768}}, {{3, 5000}, {5000}}};
  for (DType t : {f32, f64}) {
    for (const auto& [shape, ns] : cases) {
      for (bool affine : {false, true}) {
        Tensor x = random_tensor(shape, t, seed++, -3, 3), g = random_tensor(shape, t, seed++);
        Tensor w = affine ? random_tensor(ns, t, seed++) : Tensor();
        Attrs a{{"normalized_shape", ns}, {"eps", 1e-5}};
        TensorList in{x, g};
        if (affine) in.push_back(w);
        Tensor dx = run("layer_norm_backward", in, a);
        Tolerance tol = tolerance(t);
        if (t == f32) tol.atol = 1e-4;  // a difference of row means times 1/std
        check_close(dx, layer_norm_backward_ref(x, g, numel(ns), w, 1e-5), shape, tol,
                    "layer_norm_backward " + std::string(name(t)) + " " + to_string(shape) + (affine ? " affine" : ""));
      }
    }
  }
  // A strided input (every other column) and its gradient.
  Tensor x = random_tensor({6, 64}, f32, seed++).narrow(1, 0, 32), g = random_tensor({6, 32}, f32, seed++);
  Attrs a{{"normalized_shape", Shape{32}}, {"eps", 1e-5}};
  Tolerance tol = tolerance(f32);
  tol.atol = 1e-4;
  check_close(run("layer_norm_backward", {x, g}, a), layer_norm_backward_ref(x, g, 32, Tensor(), 1e-5), {6, 32}, tol,
              "layer_norm_backward of a view");
}

namespace {

Values cross_entropy_backward_ref(const Tensor& logits, const Tensor& targets, double g) {
  int64_t classes = logits.size(-1);
  Values v = host_values(logits), t = host_values(targets), out;
  size_t rows = t.size();
  for (size_t n = 0; n < rows; ++n) {
    Values row(v.begin() + long(n) * classes, v.begin() + long(n + 1) * classes);
    double m = *std::max_element(row.begin(), row.end()), s = 0;
    for (double e : row) s += std::exp(e - m);
    for (int64_t c = 0; c < classes; ++c)
      out.push_back((std::exp(row[size_t(c)] - m) / s - (c == int64_t(t[n]) ? 1.0 : 0.0)) * g / double(rows));
  }
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(cross_entropy_backward_op_matches_reference) {
  uint64_t seed = 1300;
  for (DType t : {f32, f64}) {
    for (const auto& [n, c] : std::vector<std::pair<int64_t, int64_t>>{{1, 5}, {4, 10}, {37, 3}, {200, 130}, {2, 20000}}) {
      Tensor logits = random_tensor({n, c}, t, seed++, -5, 5);
      Tensor targets = random_tensor({n}, i64, seed++, 0, double(c));
      Tensor g = full({}, 0.75, {t, Device::cpu()});
      TensorList forward = dispatch(op_def("cross_entropy"), {logits, targets}, {});
      BOOST_TEST(forward.size() == 2u);  // the loss and each row's log-sum-exp
      check_close(forward[1], host_values(logsumexp(logits.to(f64), {1})), {n}, tolerance(t), "cross_entropy's lse");
      Tensor dx = run("cross_entropy_backward", {logits, targets, forward[1], g}, {});
      Tolerance tol = tolerance(t);
      if (t == f32) tol.atol = 1e-6;
      check_close(dx, cross_entropy_backward_ref(logits, targets, 0.75), {n, c}, tol,
                  "cross_entropy_backward " + std::string(name(t)) + " (" + std::to_string(n) + ", " + std::to_string(c) + ")");
    }
  }
  // Unbatched logits, and logits read through a transpose.
  Tensor logits = random_tensor({9}, f32, seed++, -3, 3), target = full({}, 4.0, {i64, Device::cpu()});
  Tensor g = full({}, 2.0, {f32, Device::cpu()});
  check_close(run("cross_entropy_backward", {logits, target, logsumexp(logits, {0}), g}, {}),
              cross_entropy_backward_ref(logits.unsqueeze(0), target.reshape({1}), 2.0), {9}, tolerance(f32), "unbatched");
  Tensor wide = random_tensor({7, 5}, f32, seed++, -3, 3).transpose(0, 1);
  Tensor targets = random_tensor({5}, i64, seed++, 0, 7);
  check_close(run("cross_entropy_backward", {wide, targets, logsumexp(wide, {1}), g}, {}),
              cross_entropy_backward_ref(wide, targets, 2.0),
              {5, 7}, tolerance(f32), "transposed logits");
}

// The autograd rules run the fused ops on real tensors: the tape's gradients equal the references.
BOOST_AUTO_TEST_CASE(eager_autograd_uses_the_fused_backward_ops) {
  uint64_t seed = 1400;
  Tensor x = random_tensor({5, 9}, f64, seed++).requires_grad_();
  Tensor g = random_tensor({5, 9}, f64, seed++);
  (softmax(x, -1) * g).sum().backward();
  check_close(x.grad(), along_dim(softmax(x.detach(), -1), g, -1, softmax_backward_ref), {5, 9}, tolerance(f64),
              "softmax through the tape");

  Tensor w = random_tensor({9}, f64, seed++).requires_grad_(), b = random_tensor({9}, f64, seed++).requires_grad_();
  Tensor x2 = random_tensor({5, 9}, f64, seed++).requires_grad_();
  (layer_norm(x2, {9}, w, b) * g).sum().backward();
  check_close(x2.grad(), layer_norm_backward_ref(x2.detach(), g, 9, w.detach(), 1e-5), {5, 9}, tolerance(f64),
              "layer_norm through the tape");
  Values xhat = host_values(layer_norm(x2.detach(), {9})), gv = host_values(g), gw(9, 0.0), gb(9, 0.0);
  for (size_t i = 0; i < gv.size(); ++i) gw[i % 9] += gv[i] * xhat[i], gb[i % 9] += gv[i];
  check_close(w.grad(), gw, {9}, tolerance(f64), "layer_norm weight");
  check_close(b.grad(), gb, {9}, tolerance(f64), "layer_norm bias");

  Tensor logits = random_tensor({6, 11}, f64, seed++, -3, 3).requires_grad_();
  Tensor targets = random_tensor({6}, i64, seed++, 0, 11);
  (cross_entropy(logits, targets) * 3.0).backward();
  check_close(logits.grad(), cross_entropy_backward_ref(logits.detach(), targets, 3.0), {6, 11}, tolerance(f64),
              "cross_entropy through the tape");
}
