// Eager CUDA: tensors moved to and from the device, every op family on CUDA against the same op
// on the CPU (itself tested against plain loops in tests/dsl/), cuBLAS matmul against a double
// reference, autograd and an optimizer step on CUDA, the caching allocator in steady state, and
// the promise that ops never copy to the host or wait for the device.
#include <cmath>

#include "cuda/cuda_available.h"
#include "dsl/dispatch.h"
#include "support/op_db.h"
#include "support/reference.h"

using namespace kiln;
using namespace kiln::test;

namespace {

// The CPU result of `f` on `xs`, and its CUDA result on copies of `xs`, must agree within `tol`.
void check_same_on_cuda(const std::string& what, const std::function<Tensor(const TensorList&)>& f,
                        const TensorList& xs, Tolerance tol) {
  Tensor want = f(xs), got = f(to_cuda(xs));
  BOOST_TEST_CONTEXT(what) {
    BOOST_TEST(got.device() == kCuda);
    check_close(got.to(Device::cpu()), host_values(want), want.shape(), tol, what);
  }
}

const Tolerance kF32{1e-5, 1e-5};
const Tolerance kReduceF32{1e-4, 1e-4};  // sums in a different order

}  // namespace

BOOST_AUTO_TEST_CASE(round_trip_every_dtype_and_layout, *needs_cuda()) {
  for (DType t : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32, DType::i64, DType::bool_}) {
    Tensor x = random_tensor({37, 53}, t, 1 + int(t));
    Tensor back = x.to(kCuda).to(Device::cpu());
    BOOST_TEST(back.dtype() == t);
    check_close(back, host_values(x), x.shape(), {0, 0}, std::string("round trip ") + std::string(name(t)));
    Tensor view = random_view({16, 24}, t, 7, "transposed");
    check_close(view.to(kCuda).to(Device::cpu()), host_values(view), view.shape(), {0, 0}, "transposed view");
  }
  BOOST_TEST(zeros({0, 3}).to(kCuda).numel() == 0);
}

BOOST_AUTO_TEST_CASE(creation_on_the_device_matches_the_cpu, *needs_cuda()) {
  for (const CreationOpEntry& e : creation_op_db())  // every creation op of the database
    for (DType t : e.dtypes) {
      Tensor c = e.call({.dtype = t}), g = e.call({.dtype = t, .device = kCuda});
      BOOST_TEST(g.device() == kCuda);
      Tolerance tol = is_floating(t) ? Tolerance{1e-6, 1e-6} : Tolerance{0, 0};
      check_close(g.to(Device::cpu()), host_values(c), c.shape(), tol, e.label + " " + std::string(name(t)));
    }
  manual_seed(5);
  Tensor a = randn({64, 33});
  manual_seed(5);
  Tensor b = randn({64, 33}, {.device = kCuda});
  check_close(b.to(Device::cpu()), host_values(a), a.shape(), {0, 0}, "randn draws the CPU's numbers");
}

BOOST_AUTO_TEST_CASE(pointwise_ops_match_the_cpu, *needs_cuda()) {
  Tensor x = random_tensor({33, 65}, DType::f32, 11), y = random_tensor({33, 65}, DType::f32, 12);
  using F = std::function<Tensor(const TensorList&)>;
  uint64_t seed = 20;
  for (const UnaryOpEntry& c : unary_op_db()) {  // every unary op of the database, in its domain
    Tensor in = random_tensor({33, 65}, DType::f32, seed++, c.lo, c.hi);
    check_same_on_cuda(c.label, [&c](auto& v) { return c.call(v[0]); }, {in}, c.cuda_against_cpu());
  }
  for (const BinaryOpEntry& c : binary_op_db()) {  // every binary op, same shapes and broadcasting a row
    Tensor a = random_tensor({33, 65}, DType::f32, seed++, c.lhs_lo, c.lhs_hi);
    Tensor b = random_tensor({33, 65}, DType::f32, seed++, c.rhs_lo, c.rhs_hi);
    Tensor b_row = random_tensor({65}, DType::f32, seed++, c.rhs_lo, c.rhs_hi);
    Tolerance tol = c.cuda_against_cpu();
    check_same_on_cuda(c.op, [&c](auto& v) { return c.call(v[0], v[1]); }, {a, b}, tol);
    check_same_on_cuda(c.op + " broadcast row", [&c](auto& v) { return c.call(v[0], v[1]); }, {a, b_row}, tol);
  }
  for (const ReductionOpEntry& c : reduction_op_db()) {  // every reduction: rows, columns, all
    Tensor in = random_tensor({33, 65}, DType::f32, seed++);
    for (const std::vector<int64_t>& dims : std::vector<std::vector<int64_t>>{{1}, {0}, {}})
      check_same_on_cuda(c.label + " dims " + to_string(dims), [&c, dims](auto& v) { return c.call(v[0], dims, false); },
                         {in}, kF32);
  }
  check_same_on_cuda("x * 2.5 + 1", [](auto& v) { return v[0] * 2.5 + 1.0; }, {x}, kF32);
  check_same_on_cuda("where", [](auto& v) { return where(gt(v[0], 0.0), v[0], v[1]); }, {x, y}, {0, 0});
  check_same_on_cuda("transposed input", [](auto& v) { return v[0].t() + 1.0; }, {x}, kF32);
  check_same_on_cuda("rank 6", [](auto& v) { return v[0].reshape({3, 11, 5, 13, 1, 1}).permute({5, 3, 1, 0, 2, 4}) * 3.0; },
                     {x}, kF32);
  for (DType t : {DType::f16, DType::bf16, DType::i64, DType::i32, DType::bool_})
    check_same_on_cuda(std::string("cast to ") + std::string(name(t)), [t](auto& v) { return v[0].to(t); }, {x * 10.0},
                       {0, 0});
  check_same_on_cuda("i64 add", [](auto& v) { return v[0] + v[0]; }, {random_tensor({9, 10}, DType::i64, 3, -50, 50)},
                     {0, 0});
  check_same_on_cuda("bf16 mul", [](auto& v) { return v[0].to(DType::bf16) * 3.0; }, {x}, tolerance(DType::bf16));
  check_same_on_cuda("cat", [](auto& v) { return cat({v[0], v[1]}, 1); }, {x, y}, {0, 0});
}

// Every view of the op database, on the device and read back (the copy walks the view's strides),
// then fed to an op (which reads it through them).
BOOST_AUTO_TEST_CASE(views_match_the_cpu, *needs_cuda()) {
  uint64_t seed = 40;
  for (const ViewOpEntry& e : view_op_db()) {
    Tensor x = random_tensor(e.base, DType::f32, seed++);
    check_same_on_cuda(e.label, [&e](auto& v) { return e.call(v[0]); }, {x}, {0, 0});
    check_same_on_cuda(e.label + " then an op", [&e](auto& v) { return e.call(v[0]) * 2.0 + 1.0; }, {x}, kF32);
  }
}

BOOST_AUTO_TEST_CASE(reductions_and_rows_match_the_cpu, *needs_cuda()) {
  Tensor x = random_tensor({70, 300}, DType::f32, 21);
  for (int64_t d : {0, 1}) {
    std::string s = " dim " + std::to_string(d);
    check_same_on_cuda("sum" + s, [d](auto& v) { return v[0].sum({d}); }, {x}, kReduceF32);
    check_same_on_cuda("mean" + s, [d](auto& v) { return v[0].mean({d}); }, {x}, kReduceF32);
    check_same_on_cuda("max" + s, [d](auto& v) { return v[0].max({d}); }, {x}, {0, 0});
    check_same_on_cuda("argmax" + s, [d](auto& v) { return argmax(v[0], d); }, {x}, {0, 0});
    check_same_on_cuda("var" + s, [d](auto& v) { return var(v[0], {d}); }, {x}, kReduceF32);
    check_same_on_cuda("logsumexp" + s, [d](auto& v) { return logsumexp(v[0], {d}); }, {x}, kReduceF32);
  }
  uint64_t seed = 30;
  for (const RowOpEntry& e : row_op_db())  // every row op of the database
    check_same_on_cuda(e.label, [&e](auto& v) { return e.call(v); }, e.inputs({70, 300}, DType::f32, seed++, ""),
                       e.cuda_against_cpu());
  check_same_on_cuda("sum all", [](auto& v) { return v[0].sum(); }, {x}, kReduceF32);
  check_same_on_cuda("i64 sum", [](auto& v) { return v[0].sum(); }, {random_tensor({1000}, DType::i64, 4, -9, 9)},
                     {0, 0});
  Tensor w = random_tensor({300}, DType::f32, 22);
  Tensor targets = randint(0, 300, {70});
  // The fused backward ops of eager autograd.
  auto op = [](const char* name, Attrs a) {
    return [name, a](const TensorList& v) { return dispatch(op_def(name), v, a)[0]; };
  };
  Tensor y = softmax(x, -1), dy = random_tensor({70, 300}, DType::f32, 24);
  check_same_on_cuda("softmax_backward", op("softmax_backward", {{"dim", int64_t(-1)}}), {y, dy}, kReduceF32);
  check_same_on_cuda("log_softmax_backward", op("log_softmax_backward", {{"dim", int64_t(0)}}), {log_softmax(x, 0), dy},
                     kReduceF32);
  Attrs ln{{"normalized_shape", Shape{300}}, {"eps", 1e-5}};
  check_same_on_cuda("layer_norm_backward", op("layer_norm_backward", ln), {x, dy, w}, kReduceF32);
  check_same_on_cuda("layer_norm_backward plain", op("layer_norm_backward", ln), {x, dy}, kReduceF32);
  check_same_on_cuda("cross_entropy lse", [](auto& v) { return dispatch(op_def("cross_entropy"), v, {})[1]; },
                     {x, targets}, kReduceF32);
  check_same_on_cuda("cross_entropy_backward", op("cross_entropy_backward", {}),
                     {x, targets, logsumexp(x, {1}), full({}, 0.5, {DType::f32, Device::cpu()})}, kReduceF32);
  // Column sums at a bias gradient's size (the CUDA "columns" kernels).
  Tensor tall = random_tensor({8192, 768}, DType::f32, 25);
  check_same_on_cuda("column sum", [](auto& v) { return v[0].sum({0}); }, {tall}, kReduceF32);
  check_same_on_cuda("column mean f64", [](auto& v) { return v[0].mean({0}); }, {tall.to(DType::f64)}, kReduceF32);
}

// The ops of the database by sample operands (where, casts, isfinite, argmax, cat, embedding and
// its scatter-add backward, detach, contiguous), in f32.
BOOST_AUTO_TEST_CASE(sample_ops_match_the_cpu, *needs_cuda()) {
  uint64_t seed = 60;
  for (const SampleOpEntry& e : sample_op_db())
    check_same_on_cuda(e.label, e.call, e.inputs(DType::f32, seed++), e.exact ? Tolerance{0, 0} : kReduceF32);
}

BOOST_AUTO_TEST_CASE(cublas_matmul_matches_a_double_reference, *needs_cuda()) {
  uint64_t seed = 50;
  for (const MatmulOpEntry& e : matmul_op_db()) {  // every product of the op database, in f64
    check_same_on_cuda(e.label, [&e](auto& v) { return e.call(v); }, e.inputs(DType::f64, seed), {1e-12, 1e-12});
    seed += 3;
  }
  struct Case {
    Shape a, b;
    bool transpose_b;
  };
  for (const Case& c : {Case{{64, 96}, {96, 80}, false}, Case{{3, 17, 33}, {33, 9}, false},
                        Case{{5, 31, 16}, {5, 16, 7}, false}, Case{{40, 64}, {50, 64}, true},
                        Case{{64}, {64, 10}, false}, Case{{12, 64}, {64}, false}, Case{{2, 3, 8, 16}, {3, 16, 4}, false}}) {
    Tensor a = random_tensor(c.a, DType::f32, 41), b = random_tensor(c.b, DType::f32, 42);
    check_same_on_cuda("matmul " + to_string(c.a) + " x " + to_string(c.b) + (c.transpose_b ? "^T" : ""),
                       [&](auto& v) { return matmul(v[0], c.transpose_b ? v[1].t() : v[1]); },
                       {a.to(DType::f64), b.to(DType::f64)}, {1e-12, 1e-12});
    // f32 in full precision (TF32 is off by default) against the f64 result.
    Tensor want = matmul(a.to(DType::f64), c.transpose_b ? b.to(DType::f64).t() : b.to(DType::f64));
    Tensor got = matmul(a.to(kCuda), c.transpose_b ? b.to(kCuda).t() : b.to(kCuda));
    check_close(got.to(Device::cpu()), host_values(want), want.shape(), {1e-5, 1e-5}, "f32 matmul");
  }
  Tensor a = random_tensor({128, 256}, DType::f32, 43), b = random_tensor({256, 64}, DType::f32, 44);
  std::vector<double> want = host_values(matmul(a.to(DType::f64), b.to(DType::f64)));
  for (DType t : {DType::f16, DType::bf16}) {
    Tensor got = matmul(a.to(t).to(kCuda), b.to(t).to(kCuda));
    BOOST_TEST(got.dtype() == t);
    check_close(got.to(Device::cpu()).to(DType::f32), want, {128, 64}, {2e-2, 0.25}, "low-precision matmul");
  }
  set_float32_matmul_precision(Float32MatmulPrecision::high);
  Tensor tf32 = matmul(a.to(kCuda), b.to(kCuda));
  set_float32_matmul_precision(Float32MatmulPrecision::highest);
  check_close(tf32.to(Device::cpu()), want, {128, 64}, {5e-3, 5e-2}, "tf32 matmul");
}

// Heads viewed out of one projection ([B, T, H, D] as [B, H, T, D]: batch dims no one stride
// walks) go to cuBLAS as pointer arrays, with no copy of q, k or v and no host wait; a batch of
// more problems than one upload holds (cuda_upload_arguments) is split over several calls. Against
// the f64 product on the CPU.
BOOST_AUTO_TEST_CASE(matmul_on_head_views_passes_pointers_and_copies_nothing, *needs_cuda()) {
  struct Case {
    int64_t B, T, H, D;
  };
  for (const Case& c : {Case{2, 24, 3, 16}, Case{4, 8, 200, 8}}) {  // 6 and 800 problems
    Tensor qkv = random_tensor({c.B, c.T, 3 * c.H * c.D}, DType::f32, 45);
    auto heads = [&](const Tensor& x, int64_t i) {
      return x.slice(2, i * c.H * c.D, (i + 1) * c.H * c.D).view({c.B, c.T, c.H, c.D}).transpose(1, 2);
    };
    auto attend = [&](const Tensor& x) {  // (q k^T) v, without the softmax
      return matmul(matmul(heads(x, 0), heads(x, 1).transpose(-1, -2)), heads(x, 2));
    };
    Tensor want = attend(qkv.to(DType::f64));
    Tensor on_device = qkv.to(kCuda);
    (void)attend(on_device);  // first use: cuBLAS handle, upload rings
    CudaCounters before = cuda_counters();
    Tensor got = attend(on_device);
    CudaCounters after = cuda_counters();
    BOOST_TEST_CONTEXT("B, T, H, D = " << c.B << ", " << c.T << ", " << c.H << ", " << c.D) {
      BOOST_TEST(after.host_to_device == before.host_to_device);
      BOOST_TEST(after.synchronizations == before.synchronizations);
      size_t problems = size_t(c.B * c.H), per_upload = kArgumentSlotBytes / (3 * sizeof(void*));
      BOOST_TEST(after.argument_uploads - before.argument_uploads == 2 * ((problems + per_upload - 1) / per_upload));
      check_close(got.to(Device::cpu()), host_values(want), want.shape(), {1e-4, 1e-4}, "q k^T v on head views");
    }
  }
}

// matmul_bias (made by the compile pass cublas_bias_epilogue): a Linear's product with its bias
// added in cuBLASLt's epilogue, with the weight read transposed as a Linear does, in f32, f16 and
// bf16; a batch of products, where the epilogue does not apply, adds the bias afterwards. Against
// the f64 product plus bias on the CPU.
BOOST_AUTO_TEST_CASE(matmul_bias_adds_the_bias_in_the_gemm, *needs_cuda()) {
  struct Case {
    Shape x, w;  // w: [N, K] read transposed, or a batch [.., K, N] read as is
    bool linear;
  };
  for (const Case& c : {Case{{64, 96}, {80, 96}, true}, Case{{3, 17, 33}, {9, 33}, true},
                        Case{{2, 3, 5, 16}, {2, 3, 16, 7}, false}}) {
    Tensor x = random_tensor(c.x, DType::f32, 46), w = random_tensor(c.w, DType::f32, 47);
    Tensor bias = random_tensor({c.linear ? c.w[0] : c.w.back()}, DType::f32, 48);
    auto weight = [&](const Tensor& t) { return c.linear ? t.t() : t; };
    Tensor want = add(matmul(x.to(DType::f64), weight(w.to(DType::f64))), bias.to(DType::f64));
    for (DType t : {DType::f32, DType::f16, DType::bf16}) {
      Tensor got = dispatch(op_def("matmul_bias"), {x.to(t).to(kCuda), weight(w.to(t).to(kCuda)), bias.to(t).to(kCuda)})[0];
      BOOST_TEST(got.dtype() == t);
      Tolerance tol = t == DType::f32 ? Tolerance{1e-5, 1e-5} : Tolerance{2e-2, 0.25};
      check_close(got.to(Device::cpu()).to(DType::f64), host_values(want), want.shape(), tol,
                  "matmul_bias " + to_string(c.x) + " x " + to_string(c.w) + " in " + std::string(name(t)));
    }
  }
}

// The GEMMs with GELU's tanh form in cuBLASLt's epilogue (made by the compile pass
// cublas_gelu_epilogues): matmul_bias_gelu with and without GELU's input as a second output, and
// matmul_gelu_backward, in f32, f16 and bf16, against double loops; GPT-2 small's fc shape among
// them. Rows of 12 cannot carry aux (cuBLASLt wants a multiple of 8): the op computes the product
// and then GELU's kernels, with the same values.
BOOST_AUTO_TEST_CASE(gelu_epilogues_match_double_loops, *needs_cuda()) {
  struct Case {
    Shape x;
    int64_t n;
  };
  const Attrs tanh{{"approximate", std::string("tanh")}};
  uint64_t seed = 70;
  for (const Case& c : {Case{{64, 96}, 80}, Case{{3, 17, 32}, 40}, Case{{40, 16}, 12}, Case{{256, 768}, 3072}}) {
    const int64_t k = c.x.back();
    Tensor x = random_tensor(c.x, DType::f32, seed++), w = random_tensor({c.n, k}, DType::f32, seed++, -0.2, 0.2);
    Tensor bias = random_tensor({c.n}, DType::f32, seed++);
    Shape out_shape = c.x;
    out_shape.back() = c.n;
    for (DType t : {DType::f32, DType::f16, DType::bf16}) {
      BOOST_TEST_CONTEXT(to_string(c.x) << " x [" << c.n << ", " << k << "] in " << name(t)) {
        Tensor xt = x.to(t), wt = w.to(t), bt = bias.to(t);  // the reference reads the rounded values
        std::vector<double> pre = linear_reference(xt, wt, bt), y(pre.size());
        for (size_t i = 0; i < pre.size(); ++i) y[i] = gelu_reference(pre[i], "tanh");
        // f32: the product to 1e-4; GELU and its derivative to 1e-3 (cuBLASLt may take a fast tanh).
        Tolerance tol = t == DType::f32 ? Tolerance{1e-3, 1e-3} : Tolerance{2e-2, 0.1};
        Tolerance product_tol = t == DType::f32 ? Tolerance{1e-4, 1e-4} : tol;
        for (bool aux : {false, true}) {
          Attrs attrs = tanh;
          attrs.set("aux", aux);
          TensorList got = dispatch(op_def("matmul_bias_gelu"), {xt.to(kCuda), wt.to(kCuda).t(), bt.to(kCuda)}, attrs);
          BOOST_TEST_REQUIRE(got.size() == (aux ? 2u : 1u));
          BOOST_TEST(got[0].dtype() == t);
          check_close(got[0].to(Device::cpu()).to(DType::f64), y, out_shape, tol, "matmul_bias_gelu");
          if (aux) check_close(got[1].to(Device::cpu()).to(DType::f64), pre, out_shape, product_tol, "GELU's input");
        }
        Tensor g = random_tensor(c.x, DType::f32, seed++).to(t), at = random_tensor(out_shape, DType::f32, seed++).to(t);
        std::vector<double> product = linear_reference(g, wt, Tensor()), xv = host_values(at), want(product.size());
        for (size_t i = 0; i < want.size(); ++i) want[i] = product[i] * gelu_grad_reference(xv[i], "tanh");
        Tensor got = dispatch(op_def("matmul_gelu_backward"), {g.to(kCuda), wt.to(kCuda).t(), at.to(kCuda)}, tanh)[0];
        check_close(got.to(Device::cpu()).to(DType::f64), want, out_shape, tol, "matmul_gelu_backward");
      }
    }
  }
}

// matmul_bias_grad (made by the compile pass cublas_bias_grad_epilogues): a Linear's weight
// gradient dy^T x with its bias gradient, dy summed over the tokens, in cuBLASLt's BGRADB
// epilogue, in f32, f16 and bf16 (f64 takes the product and a sum kernel), against double loops;
// GPT-2 small's fc shape among them.
BOOST_AUTO_TEST_CASE(bias_grad_epilogue_matches_double_loops, *needs_cuda()) {
  struct Case {
    int64_t m, k, n;  // dy [m, n], x [m, k]: the product is [n, k], the bias gradient [n]
  };
  uint64_t seed = 80;
  for (const Case& c : {Case{64, 24, 40}, Case{200, 48, 16}, Case{1024, 768, 3072}}) {
    Tensor dy = random_tensor({c.m, c.n}, DType::f32, seed++), x = random_tensor({c.m, c.k}, DType::f32, seed++);
    for (DType t : {DType::f32, DType::f16, DType::bf16, DType::f64}) {
      BOOST_TEST_CONTEXT("dy [" << c.m << ", " << c.n << "], x [" << c.m << ", " << c.k << "] in " << name(t)) {
        Tensor dyt = dy.to(t), xt = x.to(t);
        std::vector<double> dyv = host_values(dyt), xv = host_values(xt), dw(size_t(c.n * c.k), 0.0), db(size_t(c.n), 0.0);
        for (int64_t i = 0; i < c.m; ++i)
          for (int64_t j = 0; j < c.n; ++j) {
            double g = dyv[size_t(i * c.n + j)];
            db[size_t(j)] += g;
            for (int64_t q = 0; q < c.k; ++q) dw[size_t(j * c.k + q)] += g * xv[size_t(i * c.k + q)];
          }
        TensorList got = dispatch(op_def("matmul_bias_grad"), {dyt.to(kCuda).t(), xt.to(kCuda)});
        BOOST_TEST_REQUIRE(got.size() == 2u);
        BOOST_TEST(got[1].dtype() == t);
        // Sums of up to 1024 terms of size ~1: 16-bit results keep 8 or 11 bits.
        Tolerance tol = t == DType::f64 ? Tolerance{1e-10, 1e-10} : t == DType::f32 ? Tolerance{1e-4, 1e-3} : Tolerance{2e-2, 0.5};
        check_close(got[0].to(Device::cpu()).to(DType::f64), dw, {c.n, c.k}, tol, "weight gradient");
        check_close(got[1].to(Device::cpu()).to(DType::f64), db, {c.n}, tol, "bias gradient");
      }
    }
  }
}

// scaled_dot_product_attention: the fused op on CUDA (cuBLAS products around the probabilities
// kernel) against the CPU's fused kernel, forward and gradients, causal and not, with q, k, v as
// the strided head views of one qkv projection and at GPT-2 small's head size and length. The CPU
// kernel is itself tested against the matmul-softmax chain in f64 (tests/dsl/test_attention.cpp).
BOOST_AUTO_TEST_CASE(attention_matches_the_cpu, *needs_cuda()) {
  struct Case {
    int64_t batch, heads, queries, keys, features;
    bool causal;
  };
  for (const Case& c : {Case{2, 3, 70, 70, 16, true}, Case{2, 3, 70, 70, 16, false}, Case{1, 2, 50, 90, 8, true},
                        Case{1, 2, 90, 50, 8, true}, Case{2, 12, 1024, 1024, 64, true}}) {
    std::string what = "attention [" + std::to_string(c.batch) + ", " + std::to_string(c.heads) + ", " +
                       std::to_string(c.queries) + "/" + std::to_string(c.keys) + ", " + std::to_string(c.features) +
                       "]" + (c.causal ? " causal" : "");
    int64_t width = c.heads * c.features;
    // q from its own projection, k and v as head views of one [B, Tk, 2 * width] tensor.
    Tensor q = random_tensor({c.batch, c.queries, width}, DType::f32, 51);
    Tensor kv = random_tensor({c.batch, c.keys, 2 * width}, DType::f32, 52);
    Tensor dout = random_tensor({c.batch, c.heads, c.queries, c.features}, DType::f32, 53);
    auto run = [&](const TensorList& v, bool grads) {
      Tensor qq = v[0].detach().requires_grad_(), kvv = v[1].detach().requires_grad_();
      auto heads = [&](const Tensor& t, int64_t at) {
        return t.narrow(-1, at, width).unflatten(-1, {c.heads, c.features}).transpose(1, 2);
      };
      Tensor out = scaled_dot_product_attention(heads(qq, 0), heads(kvv, 0), heads(kvv, width), c.causal);
      if (!grads) return out;
      (out * v[2]).sum().backward();
      return cat({qq.grad().flatten(), kvv.grad().flatten()}, 0);
    };
    check_same_on_cuda(what, [&](auto& v) { return run(v, false); }, {q, kv, dout}, kReduceF32);
    check_same_on_cuda(what + " gradients", [&](auto& v) { return run(v, true); }, {q, kv, dout}, {1e-4, 1e-4});
  }
  // The log-sum-exp output, which the backward reads.
  Tensor q = random_tensor({2, 3, 40, 16}, DType::f32, 54), k = random_tensor({2, 3, 40, 16}, DType::f32, 55);
  Tensor v = random_tensor({2, 3, 40, 16}, DType::f32, 56);
  check_same_on_cuda("attention lse",
                     [](auto& t) { return dispatch(op_def("attention"), t, {{"scale", 0.3}, {"causal", true}})[1]; },
                     {q, k, v}, kReduceF32);
}

// Three training steps of a tiny GPT, forward, backward and update on CUDA against the CPU: the
// losses, and the parameters after SGD (linear in the gradients, so the comparison is tight; AdamW
// divides by the gradients' running magnitude, which turns rounding differences of near-zero
// gradients into lr-sized ones), then AdamW steps run on CUDA.
BOOST_AUTO_TEST_CASE(training_step_on_cuda_matches_the_cpu, *needs_cuda()) {
  const nn::GptConfig cfg{.vocab = 11, .seq = 8, .width = 32, .heads = 4, .layers = 2};
  manual_seed(3);
  nn::TinyGpt cpu_model(cfg);
  manual_seed(3);
  nn::TinyGpt gpu_model(cfg);
  gpu_model.to(kCuda);
  optim::SGD cpu_opt(cpu_model.parameters(), {.lr = 0.1});
  optim::SGD gpu_opt(gpu_model.parameters(), {.lr = 0.1});
  Tensor tokens = randint(0, 11, {4, 8}), targets = randint(0, 11, {32});
  auto loss_of = [&](nn::TinyGpt& m, const Tensor& t, const Tensor& y) {
    return cross_entropy(m.forward(t).reshape({32, 11}), y);
  };
  for (int step = 0; step < 3; ++step) {
    Tensor l1 = loss_of(cpu_model, tokens, targets), l2 = loss_of(gpu_model, tokens.to(kCuda), targets.to(kCuda));
    BOOST_TEST(l2.item<float>() == l1.item<float>(), boost::test_tools::tolerance(1e-4f));
    l1.backward();
    l2.backward();
    cpu_opt.step();
    gpu_opt.step();
    cpu_opt.zero_grad();
    gpu_opt.zero_grad();
  }
  auto cp = cpu_model.named_parameters(), gp = gpu_model.named_parameters();
  for (size_t i = 0; i < cp.size(); ++i) {
    BOOST_TEST(gp[i].second.device() == kCuda);
    check_close(gp[i].second.to(Device::cpu()), host_values(cp[i].second), cp[i].second.shape(), {1e-4, 1e-5},
                "parameter " + cp[i].first + " after 3 SGD steps");
  }
  optim::AdamW adam(gpu_model.parameters(), {.lr = 1e-2});
  float before = loss_of(gpu_model, tokens.to(kCuda), targets.to(kCuda)).item<float>(), after = before;
  for (int step = 0; step < 20; ++step) {
    Tensor l = loss_of(gpu_model, tokens.to(kCuda), targets.to(kCuda));
    l.backward();
    adam.step();
    adam.zero_grad();
    after = l.item<float>();
  }
  BOOST_TEST(after < before);  // the same batch: AdamW on CUDA fits it
}

BOOST_AUTO_TEST_CASE(ops_never_copy_or_wait, *needs_cuda()) {
  Tensor x = randn({256, 512}).to(kCuda), w = randn({512, 512}).to(kCuda), b = randn({512}).to(kCuda);
  auto step = [&] { return log_softmax(layer_norm(gelu(linear(x, w, b)), {512}), -1).sum({1}); };
  step();  // first use: module loads, cuBLAS handle
  CudaCounters before = cuda_counters();
  Tensor y;
  for (int i = 0; i < 5; ++i) y = step();
  CudaCounters after = cuda_counters();
  BOOST_TEST(after.host_to_device == before.host_to_device);
  BOOST_TEST(after.device_to_host == before.device_to_host);
  BOOST_TEST(after.synchronizations == before.synchronizations);
  (void)y.sum().item<float>();  // a host sync: exactly one copy back and one wait
  CudaCounters synced = cuda_counters();
  BOOST_TEST(synced.device_to_host == after.device_to_host + 1);
  BOOST_TEST(synced.synchronizations >= after.synchronizations + 1);
}

BOOST_AUTO_TEST_CASE(allocator_reaches_a_steady_state, *needs_cuda()) {
  CachingAllocator& a = cuda_caching_allocator(0);
  auto churn = [] {
    for (int64_t n : {1, 7, 100, 4096, 65537, 1 << 20, 3 << 20, 12345, 1 << 22}) {
      Tensor t = full({n}, 1.0, {.device = kCuda});
      Tensor u = t * 2.0 + t;
      (void)u;
    }
  };
  churn();
  uint64_t driver = cuda_driver_allocations();
  size_t reserved = a.stats().reserved;
  for (int i = 0; i < 20; ++i) churn();
  BOOST_TEST(cuda_driver_allocations() == driver);  // every block came from the cache
  BOOST_TEST(a.stats().reserved == reserved);
  BOOST_TEST(a.stats().peak_allocated >= size_t(3 << 20) * 4);
}

BOOST_AUTO_TEST_CASE(mixed_devices_are_an_error_that_names_both, *needs_cuda()) {
  Tensor x = randn({4, 4}), g = randn({4, 4}).to(kCuda);
  try {
    (void)(x + g);
    BOOST_FAIL("no error");
  } catch (const Error& e) {
    std::string m = e.what();
    BOOST_TEST(m.find("add") != std::string::npos);
    BOOST_TEST(m.find("cuda:0") != std::string::npos);
    BOOST_TEST(m.find("cpu") != std::string::npos);
  }
  BOOST_CHECK_THROW(randn({2}, {.device = Device::cuda(99)}), Error);
  BOOST_CHECK_THROW((void)g.data<float>(), Error);
}
