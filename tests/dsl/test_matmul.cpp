// matmul and linear against a double reference loop on fresh random inputs, through each CPU
// backend (the Halide kernels, Eigen, and the automatic choice): 1-D, 2-D, batched and broadcast
// shapes, sizes that hit and miss the tile specializations, size-1 and empty dims, transposed and
// sliced operands, every float dtype, and every error path.
#include "dsl/dispatch.h"
#include "dsl/eager/eigen_gemm.h"
#include "dsl/eager/matmul.h"
#include "support/op_db.h"
#include "support/reference.h"

using namespace kiln;
using namespace kiln::test;

namespace {

struct Ref {
  std::vector<double> values;
  Shape shape;
};

Ref matmul_ref(const Tensor& a, const Tensor& b) {
  Ref r;
  r.values = matmul_reference(a, b, &r.shape);
  return r;
}

// Sums of k products of values in [-1, 1]: the absolute error grows with k.
Tolerance sum_tolerance(DType t, int64_t k) {
  switch (t) {
    case DType::f64: return {1e-12, 1e-14 * double(k + 1)};
    case DType::f32: return {1e-5, 1e-6 * double(k + 1)};
    default: return tolerance(t);
  }
}

const std::vector<std::pair<MatmulBackend, const char*>> kBackends = {
    {MatmulBackend::halide, "halide"}, {MatmulBackend::eigen, "eigen"}, {MatmulBackend::automatic, "automatic"}};

void check_matmul(const Tensor& a, const Tensor& b, const std::string& what) {
  Ref want = matmul_ref(a, b);
  int64_t k = a.shape().back();
  for (const auto& [backend, backend_name] : kBackends) {
    MatmulBackendGuard g(backend);
    Tensor got = matmul(a, b);
    BOOST_TEST(got.dtype() == a.dtype());
    check_close(got, want.values, want.shape, sum_tolerance(a.dtype(), k),
                what + " " + std::string(name(a.dtype())) + " " + to_string(a.shape()) + " x " +
                    to_string(b.shape()) + " on " + backend_name);
  }
}

}  // namespace

// Every matrix product of the op database (tests/support/op_db.h) on every CPU backend.
BOOST_AUTO_TEST_CASE(matmul_shapes_match_reference) {
  uint64_t seed = 1;
  for (DType t : {f32, f64})
    for (const MatmulOpEntry& e : matmul_op_db()) {
      TensorList in = e.inputs(t, seed);
      seed += 3;
      Shape shape;
      std::vector<double> want = e.reference(in, &shape);
      for (const auto& [backend, backend_name] : kBackends) {
        MatmulBackendGuard g(backend);
        Tensor got = e.call(in);
        BOOST_TEST(got.dtype() == t);
        check_close(got, want, shape, e.against_reference(t),
                    e.label + " " + std::string(name(t)) + " " + to_string(e.a) + " x " + to_string(e.b) + " on " + backend_name);
      }
    }
}

BOOST_AUTO_TEST_CASE(matmul_empty_and_zero_inner_dims) {
  uint64_t seed = 100;
  for (DType t : {f32, f64, f16}) {
    for (const auto& [sa, sb] : std::vector<std::pair<Shape, Shape>>{
             {{0, 3}, {3, 4}}, {{3, 0}, {0, 4}}, {{0}, {0}}, {{2, 0, 3}, {3, 5}}, {{5, 0}, {0, 40}}, {{4, 3}, {3, 0}}}) {
      Tensor a = random_tensor(sa, t, seed++), b = random_tensor(sb, t, seed++);
      for (const auto& [backend, backend_name] : kBackends) {
        MatmulBackendGuard g(backend);
        Ref want = matmul_ref(a, b);  // K = 0 gives zeros
        check_close(matmul(a, b), want.values, want.shape, to_string(sa) + " x " + to_string(sb) + " on " + backend_name);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(matmul_half_precision_computes_through_f32) {
  uint64_t seed = 200;
  for (DType t : {f16, bf16})
    for (const auto& [sa, sb] : std::vector<std::pair<Shape, Shape>>{{{3, 4}, {4, 5}}, {{33, 20}, {20, 70}}, {{2, 9, 8}, {8}}}) {
      Tensor a = random_tensor(sa, t, seed++, -1, 1);
      check_matmul(a, random_tensor(sb, t, seed++, -1, 1), "half");
    }
}

BOOST_AUTO_TEST_CASE(matmul_on_transposed_sliced_and_expanded_views) {
  uint64_t seed = 300;
  for (DType t : {f32, f64}) {
    for (const auto& [sa, sb] : std::vector<std::pair<Shape, Shape>>{
             {{5, 7}, {7, 3}}, {{40, 24}, {24, 64}}, {{70, 33}, {33, 45}}, {{3, 16, 12}, {3, 12, 40}}}) {
      for (const char* ka : {"dense", "transposed", "sliced"})
        for (const char* kb : {"dense", "transposed", "sliced", "expanded"}) {
          Tensor a = random_view(sa, t, seed++, ka), b = random_view(sb, t, seed++, kb);
          check_matmul(a, b, std::string(ka) + " x " + kb);
        }
    }
    // matmul(x, w.t()): the weight is read through its strides.
    Tensor x = random_tensor({37, 50}, t, seed++, -1, 1);
    Tensor w = random_tensor({90, 50}, t, seed++, -1, 1);
    check_matmul(x, w.t(), "x w^T");
    check_matmul(x.t(), random_tensor({37, 41}, t, seed++, -1, 1), "x^T y");
  }
}

BOOST_AUTO_TEST_CASE(eigen_gemm_function_matches_reference) {
  BOOST_TEST_MESSAGE("eigen_gemm runs its " << eigen_gemm_isa() << " build");
  uint64_t seed = 400;
  for (DType t : {f32, f64}) {
    Tensor a = random_tensor({130, 70}, t, seed++, -1, 1), b = random_view({70, 90}, t, seed++, "transposed");
    Tensor out = Tensor::empty({130, 90}, {t, Device::cpu()});
    eigen_gemm(a, b, out);
    Ref want = matmul_ref(a, b);
    check_close(out, want.values, want.shape, sum_tolerance(t, 70), "eigen_gemm");
  }
  check_error([] { eigen_gemm(zeros({2, 3}), zeros({4, 5}), zeros({2, 5})); }, {"eigen_gemm", "[2, 3]", "[4, 5]"});
}

BOOST_AUTO_TEST_CASE(linear_with_and_without_bias) {
  uint64_t seed = 500;
  for (DType t : {f32, f64, bf16}) {
    for (const Shape& xs : std::vector<Shape>{{12}, {5, 12}, {2, 3, 12}, {40, 12}}) {
      Tensor x = random_tensor(xs, t, seed++, -1, 1);
      Tensor w = random_tensor({33, 12}, t, seed++, -1, 1);
      Tensor bias = random_tensor({33}, t, seed++, -1, 1);
      Ref want = matmul_ref(x, w.t());
      Tolerance tol = sum_tolerance(t, 12);
      check_close(linear(x, w), want.values, want.shape, tol, "linear no bias " + to_string(xs));
      std::vector<double> vb = host_values(bias);
      for (size_t i = 0; i < want.values.size(); ++i) want.values[i] += vb[i % 33];
      check_close(linear(x, w, bias), want.values, want.shape, tol, "linear with bias " + to_string(xs));
    }
  }
}

BOOST_AUTO_TEST_CASE(matmul_and_linear_errors) {
  Tensor m34 = zeros({3, 4}), m45 = zeros({4, 5}), m35 = zeros({3, 5});
  check_error([&] { matmul(m34, m35); }, {"matmul", "inner dims must match: 4 vs 3", "[3, 4]", "[3, 5]"});
  check_error([&] { matmul(zeros({3}), zeros({4})); }, {"matmul", "inner dims must match: 3 vs 4"});
  check_error([&] { matmul(zeros({}), m45); }, {"matmul", "at least 1 dim", "[]"});
  check_error([&] { matmul(zeros({2, 3, 4}), zeros({3, 4, 5})); },
              {"matmul", "batch dims", "[2]", "[3]", "do not broadcast"});
  check_error([&] { matmul(zeros({3, 4}, {.dtype = i32}), zeros({4, 5}, {.dtype = i32})); },
              {"matmul", "floating", "i32"});
  check_error([&] { matmul(zeros({3, 4}, {.dtype = i64}), zeros({4, 5}, {.dtype = i64})); }, {"matmul", "i64"});
  check_error([&] { matmul(m34, zeros({4, 5}, {.dtype = f64})); }, {"matmul", "same dtype", "f32", "f64"});

  check_error([&] { linear(zeros({2, 3}), zeros({5, 4})); },
              {"linear", "inner dims must match: 3 vs 4", "[2, 3]", "[5, 4]"});
  check_error([&] { linear(zeros({2, 4}), zeros({4})); }, {"linear", "weight must be 2-D", "[4]"});
  check_error([&] { linear(zeros({}), zeros({5, 4})); }, {"linear", "at least 1 dim"});
  check_error([&] { linear(zeros({2, 4}), zeros({5, 4}), zeros({4})); }, {"linear", "bias", "[5]", "[4]"});
  check_error([&] { linear(zeros({2, 4}, {.dtype = i32}), zeros({5, 4}, {.dtype = i32})); }, {"linear", "floating", "i32"});
  check_error([&] { linear(zeros({2, 4}), zeros({5, 4}), zeros({5}, {.dtype = f64})); }, {"linear", "bias", "f64"});
}

// The GEMMs with GELU epilogues (made on CUDA by the compile pass cublas_gelu_epilogues) run on the
// CPU too, as the product and then GELU's kernels: matmul_bias_gelu (with and without GELU's input
// as a second output) and matmul_gelu_backward against double loops; the erf form is refused
// (cuBLASLt has only the tanh form).
BOOST_AUTO_TEST_CASE(gelu_gemm_ops_match_double_loops) {
  const int64_t M = 13, K = 20, N = 24;
  Tensor x = random_tensor({M, K}, f32, 61), w = random_tensor({N, K}, f32, 62), bias = random_tensor({N}, f32, 63);
  std::vector<double> pre = linear_reference(x, w, bias), y(pre.size());
  for (size_t i = 0; i < pre.size(); ++i) y[i] = gelu_reference(pre[i], "tanh");
  for (bool aux : {false, true}) {
    TensorList out = dispatch(op_def("matmul_bias_gelu"), {x, w.t(), bias},
                              {{"approximate", std::string("tanh")}, {"aux", aux}});
    BOOST_TEST_REQUIRE(out.size() == (aux ? 2u : 1u));
    check_close(out[0], y, {M, N}, "matmul_bias_gelu");
    if (aux) check_close(out[1], pre, {M, N}, "matmul_bias_gelu: GELU's input");
  }
  Tensor g = random_tensor({M, K}, f32, 64), w2 = random_tensor({N, K}, f32, 65), at = random_tensor({M, N}, f32, 66);
  std::vector<double> product = linear_reference(g, w2, Tensor()), xv = host_values(at), want(product.size());
  for (size_t i = 0; i < want.size(); ++i) want[i] = product[i] * gelu_grad_reference(xv[i], "tanh");
  check_close(dispatch(op_def("matmul_gelu_backward"), {g, w2.t(), at}, {{"approximate", std::string("tanh")}})[0], want,
              {M, N}, "matmul_gelu_backward");
  const Attrs none{{"approximate", std::string("none")}}, tanh{{"approximate", std::string("tanh")}};
  check_error([&] { dispatch(op_def("matmul_bias_gelu"), {x, w.t(), bias}, none); },
              {"matmul_bias_gelu", "tanh form", "'none'"});
  check_error([&] { dispatch(op_def("matmul_gelu_backward"), {g, w2.t(), random_tensor({M, N + 1}, f32, 67)}, tanh); },
              {"matmul_gelu_backward", "GELU's input must be [13, 24] f32", "[13, 25]"});
}

// matmul_bias_grad (made on CUDA by the compile pass cublas_bias_grad_epilogues) on the CPU: the
// product of dy^T [N, M] and x [M, K], and dy^T summed along M (a Linear's bias gradient), against
// double loops.
BOOST_AUTO_TEST_CASE(bias_grad_gemm_op_matches_double_loops) {
  const int64_t M = 17, K = 6, N = 9;
  Tensor dy = random_tensor({M, N}, f32, 71), x = random_tensor({M, K}, f32, 72);
  TensorList out = dispatch(op_def("matmul_bias_grad"), {dy.t(), x});
  BOOST_TEST_REQUIRE(out.size() == 2u);
  std::vector<double> dyv = host_values(dy), xv = host_values(x), dw(size_t(N * K), 0.0), db(size_t(N), 0.0);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t n = 0; n < N; ++n) {
      db[size_t(n)] += dyv[size_t(i * N + n)];
      for (int64_t k = 0; k < K; ++k) dw[size_t(n * K + k)] += dyv[size_t(i * N + n)] * xv[size_t(i * K + k)];
    }
  check_close(out[0], dw, {N, K}, "matmul_bias_grad: the product");
  check_close(out[1], db, {N}, "matmul_bias_grad: the sum");
  check_error([&] { dispatch(op_def("matmul_bias_grad"), {random_tensor({2, M, N}, f32, 73), x}); },
              {"matmul_bias_grad", "2-D", "[2, 17, 9]"});
}
