// softmax, log_softmax, layer_norm and cross_entropy against plain double loops on fresh random
// inputs: every dim, non-contiguous views, sizes that reach the vectorized and parallel paths, f16,
// bf16 and integer inputs, stability on large logits, empty and 0-d tensors, and every error path.
#include <cmath>
#include <limits>

#include "support/reference.h"

using namespace kiln;
using namespace kiln::test;

namespace {

using Values = std::vector<double>;

// Applies f to every line of x along `dim` (row-major order), writing the results in place.
Values along_dim(const Tensor& x, int64_t dim, const std::function<Values(const Values&)>& f) {
  Values v = host_values(x);
  if (x.dim() == 0) return f(v);
  int64_t d = dim < 0 ? dim + x.dim() : dim;
  int64_t n = x.size(d), inner = 1;
  for (int64_t i = d + 1; i < x.dim(); ++i) inner *= x.size(i);
  int64_t outer = n == 0 ? 0 : int64_t(v.size()) / (n * inner);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      Values line;
      for (int64_t k = 0; k < n; ++k) line.push_back(v[(o * n + k) * inner + i]);
      Values r = f(line);
      for (int64_t k = 0; k < n; ++k) v[(o * n + k) * inner + i] = r[k];
    }
  return v;
}

Values log_softmax_ref(const Values& line) {
  double m = *std::max_element(line.begin(), line.end()), s = 0;
  for (double e : line) s += std::exp(e - m);
  Values r;
  for (double e : line) r.push_back(e - m - std::log(s));
  return r;
}

Values softmax_ref(const Values& line) {
  Values r = log_softmax_ref(line);
  for (double& e : r) e = std::exp(e);
  return r;
}

void check_rows(const Tensor& x, int64_t dim, DType want_dtype, const std::string& what) {
  Tensor s = softmax(x, dim), l = log_softmax(x, dim);
  BOOST_TEST(s.dtype() == want_dtype);
  BOOST_TEST(l.dtype() == want_dtype);
  Tolerance tol = tolerance(want_dtype);
  check_close(s, along_dim(x, dim, softmax_ref), x.shape(), tol, "softmax " + what);
  if (want_dtype == f32) tol.atol = 1e-5;  // log_softmax subtracts two values of row size
  check_close(l, along_dim(x, dim, log_softmax_ref), x.shape(), tol, "log_softmax " + what);
}

}  // namespace

BOOST_AUTO_TEST_CASE(softmax_and_log_softmax_match_reference) {
  uint64_t seed = 1;
  for (DType t : {f32, f64}) {
    for (const Shape& shape : std::vector<Shape>{{}, {1}, {7}, {3, 5}, {2, 3, 4}, {4, 1, 6}, {2, 3, 4, 5}, {9, 100}}) {
      int64_t rank = std::max<int64_t>(int64_t(shape.size()), 1);
      for (int64_t dim = -rank; dim < rank; ++dim) {
        Tensor x = random_tensor(shape, t, seed++, -4, 4);
        check_rows(x, dim, t, std::string(name(t)) + " " + to_string(shape) + " dim " + std::to_string(dim));
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(softmax_on_large_and_non_contiguous_inputs) {
  uint64_t seed = 100;
  // Long rows (inner), many short rows, softmax across rows (outer), and dims in the middle.
  for (const auto& [shape, dim] : std::vector<std::pair<Shape, int64_t>>{
           {{300, 257}, 1}, {{300, 257}, 0}, {{5000, 3}, 1}, {{3, 5000}, 0}, {{16, 40, 30}, 1}, {{2, 70000}, 1}}) {
    Tensor x = random_tensor(shape, f32, seed++, -4, 4);
    check_rows(x, dim, f32, "f32 " + to_string(shape) + " dim " + std::to_string(dim));
  }
  for (const char* kind : {"transposed", "sliced", "expanded"}) {
    for (const Shape& shape : std::vector<Shape>{{6, 9}, {3, 4, 17}}) {
      for (int64_t dim : {0, 1, -1}) {
        Tensor x = random_view(shape, f32, seed++, kind);
        check_rows(x, dim, f32, std::string(kind) + " " + to_string(shape) + " dim " + std::to_string(dim));
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(softmax_of_half_precision_and_integers) {
  uint64_t seed = 200;
  for (DType t : {f16, bf16}) {
    Tensor x = random_tensor({5, 33}, t, seed++, -3, 3);
    check_rows(x, 1, t, std::string(name(t)));
  }
  // Integer and bool inputs compute in f32, like kiln's other float ops.
  Tensor xi = random_tensor({4, 6}, i32, seed++, -5, 5);
  check_rows(xi, -1, f32, "i32");
  Tensor xb = random_tensor({3, 4}, bool_, seed++);
  check_rows(xb, 0, f32, "bool");
}

BOOST_AUTO_TEST_CASE(softmax_is_stable_and_handles_edges) {
  Tensor x = from_vector<float>({1000, 999, -1000, 0, 88, 89}, {3, 2});
  check_rows(x, 1, f32, "large logits");
  float inf = std::numeric_limits<float>::infinity();
  Tensor y = from_vector<float>({-inf, 0, 1, -inf}, {2, 2});
  check_close(softmax(y, 1), {0, 1, 1, 0}, {2, 2}, "-inf logits");
  Tensor s = from_vector<double>({3.5}, {});
  BOOST_TEST(softmax(s, 0).item<double>() == 1.0);
  BOOST_TEST(log_softmax(s, -1).item<double>() == 0.0);
  Tensor e = random_tensor({0, 4}, f32, 300);
  BOOST_TEST(to_string(softmax(e, 1).shape()) == "[0, 4]");
  BOOST_TEST(to_string(log_softmax(e, 0).shape()) == "[0, 4]");
  check_error([&] { softmax(x, 2); }, {"softmax", "dim 2 out of range"});
  check_error([&] { log_softmax(x, -3); }, {"log_softmax", "out of range"});
}

namespace {

Values layer_norm_ref(const Tensor& x, int64_t normalized, const Tensor& w, const Tensor& b, double eps) {
  Values v = host_values(x), wv = w.defined() ? host_values(w) : Values(), bv = b.defined() ? host_values(b) : Values();
  for (size_t row = 0; normalized > 0 && row < v.size() / size_t(normalized); ++row) {
    double* p = v.data() + row * normalized;
    double mean = 0, var = 0;
    for (int64_t i = 0; i < normalized; ++i) mean += p[i];
    mean /= double(normalized);
    for (int64_t i = 0; i < normalized; ++i) var += (p[i] - mean) * (p[i] - mean);
    var /= double(normalized);
    for (int64_t i = 0; i < normalized; ++i) {
      p[i] = (p[i] - mean) / std::sqrt(var + eps);
      if (!wv.empty()) p[i] *= wv[i];
      if (!bv.empty()) p[i] += bv[i];
    }
  }
  return v;
}

}  // namespace

BOOST_AUTO_TEST_CASE(layer_norm_matches_reference) {
  uint64_t seed = 400;
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{10}, {10}}, {{4, 10}, {10}}, {{2, 3, 8}, {3, 8}}, {{2, 3, 8}, {8}}, {{5, 1}, {1}},
      {{300, 256}, {256}}, {{64, 3, 700}, {700}}, {{2, 5000}, {5000}}};
  for (DType t : {f32, f64}) {
    for (const auto& [shape, ns] : cases) {
      for (int affine = 0; affine < 4; ++affine) {  // none, both, weight only, bias only
        Tensor x = random_tensor(shape, t, seed++, -3, 5);
        Tensor w = affine == 1 || affine == 2 ? random_tensor(ns, t, seed++, 0.5, 2) : Tensor();
        Tensor b = affine == 1 || affine == 3 ? random_tensor(ns, t, seed++) : Tensor();
        double eps = affine == 3 ? 0.5 : 1e-5;
        Tensor y = layer_norm(x, ns, w, b, eps);
        BOOST_TEST(y.dtype() == t);
        Tolerance tol = tolerance(t);
        if (t == f32) tol.atol = 1e-5;
        check_close(y, layer_norm_ref(x, numel(ns), w, b, eps), shape, tol,
                    "layer_norm " + std::string(name(t)) + " " + to_string(shape) + " over " + to_string(ns) +
                        " affine " + std::to_string(affine));
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(layer_norm_on_views_half_precision_and_empty) {
  uint64_t seed = 500;
  for (const char* kind : {"transposed", "sliced", "expanded"}) {
    Tensor x = random_view({6, 12}, f32, seed++, kind);
    Tensor w = random_view({12}, f32, seed++, "sliced"), b = random_tensor({12}, f32, seed++);
    Tolerance tol{2e-5, 1e-5};
    check_close(layer_norm(x, {12}, w, b), layer_norm_ref(x, 12, w, b, 1e-5), {6, 12}, tol,
                std::string("layer_norm ") + kind);
  }
  for (DType t : {f16, bf16}) {
    Tensor x = random_tensor({4, 32}, t, seed++);
    Tensor w = random_tensor({32}, t, seed++), b = random_tensor({32}, t, seed++);
    Tensor y = layer_norm(x, {32}, w, b);
    BOOST_TEST(y.dtype() == t);
    Tolerance tol = tolerance(t);
    tol.atol *= 4;
    check_close(y, layer_norm_ref(x, 32, w, b, 1e-5), {4, 32}, tol, "layer_norm " + std::string(name(t)));
  }
  Tensor xi = random_tensor({3, 5}, i64, seed++, -10, 10);
  check_close(layer_norm(xi, {5}), layer_norm_ref(xi, 5, Tensor(), Tensor(), 1e-5), {3, 5}, {2e-5, 1e-5},
              "layer_norm i64 computes in f32");
  BOOST_TEST(to_string(layer_norm(random_tensor({0, 8}, f32, seed++), {8}).shape()) == "[0, 8]");
}

BOOST_AUTO_TEST_CASE(layer_norm_errors) {
  Tensor x = random_tensor({4, 6}, f32, 600);
  check_error([&] { layer_norm(x, {5}); }, {"layer_norm", "[4, 6]", "does not end with normalized_shape [5]"});
  check_error([&] { layer_norm(x, {2, 4, 6}); }, {"layer_norm", "normalized_shape [2, 4, 6]"});
  check_error([&] { layer_norm(x, {}); }, {"layer_norm", "must not be empty"});
  check_error([&] { layer_norm(x, {6}, random_tensor({5}, f32, 601)); },
              {"layer_norm", "weight shape [5]", "normalized_shape [6]"});
  check_error([&] { layer_norm(x, {6}, Tensor(), random_tensor({1, 6}, f32, 602)); },
              {"layer_norm", "bias shape [1, 6]"});
  check_error([&] { layer_norm(x, {6}, random_tensor({6}, f32, 603), random_tensor({3}, f32, 604)); },
              {"layer_norm", "bias shape [3]"});
}

namespace {

double cross_entropy_ref(const Tensor& logits, const Tensor& targets) {
  int64_t classes = logits.size(-1);
  Values v = host_values(logits), t = host_values(targets);
  double total = 0;
  for (size_t n = 0; n < t.size(); ++n) {
    Values row(v.begin() + n * classes, v.begin() + (n + 1) * classes);
    total -= log_softmax_ref(row)[size_t(t[n])];
  }
  return total / double(t.size());
}

Tensor random_targets(const Shape& shape, int64_t classes, uint64_t seed) {
  return random_tensor(shape, i64, seed, 0, double(classes));
}

}  // namespace

BOOST_AUTO_TEST_CASE(cross_entropy_matches_reference) {
  uint64_t seed = 700;
  for (DType t : {f32, f64}) {
    for (const auto& [n, c] : std::vector<std::pair<int64_t, int64_t>>{
             {1, 1}, {1, 5}, {4, 10}, {37, 3}, {200, 130}, {3000, 40}, {2, 20000}}) {
      Tensor logits = random_tensor({n, c}, t, seed++, -5, 5);
      Tensor targets = random_targets({n}, c, seed++);
      Tensor loss = cross_entropy(logits, targets);
      BOOST_TEST(loss.dim() == 0);
      BOOST_TEST(loss.dtype() == t);
      Tolerance tol = tolerance(t);
      if (t == f32) tol.atol = 1e-5;
      check_close(loss, {cross_entropy_ref(logits, targets)}, {}, tol,
                  "cross_entropy " + std::string(name(t)) + " (" + std::to_string(n) + ", " + std::to_string(c) + ")");
    }
  }
}

BOOST_AUTO_TEST_CASE(cross_entropy_views_unbatched_half_and_empty) {
  uint64_t seed = 800;
  Tensor logits = random_view({9, 13}, f32, seed++, "transposed");
  Tensor targets = random_targets({18}, 13, seed++).slice(0, 0, 18, 2);
  check_close(cross_entropy(logits, targets), {cross_entropy_ref(logits, targets)}, {}, {2e-5, 1e-5},
              "transposed logits, strided targets");
  Tensor one = random_tensor({6}, f32, seed++);
  Tensor target = from_vector<int64_t>({4}, {});
  check_close(cross_entropy(one, target), {-log_softmax_ref(host_values(one))[4]}, {}, {2e-5, 1e-5},
              "unbatched logits (C) with a 0-d target");
  Tensor half = random_tensor({5, 7}, bf16, seed++);
  Tensor ht = random_targets({5}, 7, seed++);
  Tensor hl = cross_entropy(half, ht);
  BOOST_TEST(hl.dtype() == bf16);
  check_close(hl, {cross_entropy_ref(half, ht)}, {}, tolerance(bf16), "bf16 logits");
  Tensor empty_logits = random_tensor({0, 4}, f32, seed++);
  Tensor empty = cross_entropy(empty_logits, random_targets({0}, 4, seed++));
  BOOST_TEST(std::isnan(empty.item<float>()));
  Tensor big = from_vector<float>({1000, -1000, 0, 500}, {2, 2});
  check_close(cross_entropy(big, from_vector<int64_t>({1, 1})), {1000.0}, {}, "stable for large logits");
}

BOOST_AUTO_TEST_CASE(cross_entropy_errors) {
  Tensor logits = random_tensor({4, 5}, f32, 900);
  check_error([&] { cross_entropy(logits, from_vector<int64_t>({0, 1, 5, 2})); },
              {"cross_entropy", "target 5", "position 2", "5 classes"});
  check_error([&] { cross_entropy(logits, from_vector<int64_t>({0, -1, 3, 2})); }, {"cross_entropy", "target -1"});
  check_error([&] { cross_entropy(logits, from_vector<int32_t>({0, 1, 2, 3})); },
              {"cross_entropy", "dtype i64", "i32"});
  check_error([&] { cross_entropy(logits, random_tensor({4}, f32, 901)); }, {"cross_entropy", "dtype i64", "f32"});
  check_error([&] { cross_entropy(logits, from_vector<int64_t>({0, 1, 2})); },
              {"cross_entropy", "targets of shape [3]", "logits of shape [4, 5]"});
  check_error([&] { cross_entropy(random_tensor({2, 3, 4}, f32, 902), from_vector<int64_t>({0, 1})); },
              {"cross_entropy", "(N, C) or (C)", "[2, 3, 4]"});
  check_error([&] { cross_entropy(random_tensor({5}, f32, 903), from_vector<int64_t>({1})); },
              {"cross_entropy", "targets of shape [1]"});
}
