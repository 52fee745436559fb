// Attention in bf16 and f16 on CUDA, which runs cuDNN's fused flash attention: outputs and the
// three gradients against plain loops in double on the same 16-bit operands, causal and not, with
// q, k and v as strided head views of projections (as GPT-2's attention makes them), at GPT-2
// small's head size and length; the full GPT-2 small shape against kiln's f32 CUDA attention;
// compiled under autocast (the compiler puts the fused op in place of the matmul-softmax chain);
// and the errors for what cuDNN cannot run.
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "cuda/cuda_available.h"
#include "dsl/cuda/cudnn_api.h"
#include "dsl/dispatch.h"
#include "support/reference.h"

using namespace kiln;
using namespace kiln::test;

namespace {

struct Case {
  int64_t batch, heads, queries, keys, features;
  bool causal;
  std::string what(DType t) const {
    return "attention " + std::string(name(t)) + " [" + std::to_string(batch) + ", " + std::to_string(heads) + ", " +
           std::to_string(queries) + "/" + std::to_string(keys) + ", " + std::to_string(features) + "]" +
           (causal ? " causal" : "");
  }
};

// The [B, H, T, D] heads of columns [at, at + H * D) of a [B, T, width] projection.
Tensor heads(const Tensor& t, int64_t at, int64_t h, int64_t d) {
  return t.narrow(-1, at, h * d).unflatten(-1, {h, d}).transpose(1, 2);
}

}  // namespace

BOOST_AUTO_TEST_CASE(outputs_and_gradients_match_a_double_reference, *needs(cudnn_unavailable_reason)) {
  EnableGradGuard grad;
  for (DType t : {DType::bf16, DType::f16}) {
    // bf16 keeps 8 bits of mantissa: P is rounded to it before P V, as in every flash kernel.
    Tolerance tol = t == DType::bf16 ? Tolerance{3e-2, 2e-2} : Tolerance{1e-2, 4e-3};
    for (const Case& c : {Case{2, 3, 70, 70, 16, true}, Case{2, 3, 70, 70, 16, false}, Case{1, 2, 50, 90, 32, true},
                          Case{1, 2, 130, 64, 64, false}, Case{1, 2, 1024, 1024, 64, true}}) {
      const int64_t width = c.heads * c.features;
      Tensor q_proj = random_tensor({c.batch, c.queries, width}, t, 61).to(kCuda).requires_grad_();
      Tensor kv_proj = random_tensor({c.batch, c.keys, 2 * width}, t, 62).to(kCuda).requires_grad_();
      Tensor q = heads(q_proj, 0, c.heads, c.features), k = heads(kv_proj, 0, c.heads, c.features),
             v = heads(kv_proj, width, c.heads, c.features);
      BOOST_TEST(!q.is_contiguous());
      Tensor out = scaled_dot_product_attention(q, k, v, c.causal);
      BOOST_TEST(out.dtype() == t);
      Tensor dout = random_tensor(out.shape(), t, 63).to(kCuda);
      (out * dout).sum().backward();
      AttentionReference r = attention_reference(q, k, v, dout, c.causal, 1.0 / std::sqrt(double(c.features)));
      const std::string what = c.what(t);
      check_close(out, r.out, out.shape(), tol, what + ": out");
      // The projections' gradients are the heads' gradients laid out in their columns.
      Tensor gq = heads(q_proj.grad(), 0, c.heads, c.features), gk = heads(kv_proj.grad(), 0, c.heads, c.features),
             gv = heads(kv_proj.grad(), width, c.heads, c.features);
      check_close(gq, r.dq, q.shape(), tol, what + ": grad q");
      check_close(gk, r.dk, k.shape(), tol, what + ": grad k");
      check_close(gv, r.dv, v.shape(), tol, what + ": grad v");
    }
  }
}

// GPT-2 small's whole attention shape, [8, 12, 1024, 64] causal, against kiln's f32 CUDA attention
// on the same bf16 values (a double reference at this size would take minutes).
BOOST_AUTO_TEST_CASE(gpt2_small_shape_matches_f32_attention, *needs(cudnn_unavailable_reason)) {
  EnableGradGuard grad;
  const Shape shape{8, 12, 1024, 64};
  TensorList bf, f32s;
  for (uint64_t seed : {71, 72, 73}) {
    Tensor x = random_tensor(shape, DType::bf16, seed).to(kCuda);
    bf.push_back(x.detach().requires_grad_());
    f32s.push_back(x.to(DType::f32).detach().requires_grad_());
  }
  Tensor dout = random_tensor(shape, DType::bf16, 74).to(kCuda);
  Tensor got = scaled_dot_product_attention(bf[0], bf[1], bf[2], true);
  Tensor want = scaled_dot_product_attention(f32s[0], f32s[1], f32s[2], true);
  (got * dout).sum().backward();
  (want * dout.to(DType::f32)).sum().backward();
  const Tolerance tol{3e-2, 2e-2};
  check_close(got, host_values(want), shape, tol, "gpt2_small attention: out");
  const char* names[] = {"grad q", "grad k", "grad v"};
  for (int i = 0; i < 3; ++i)
    check_close(bf[size_t(i)].grad(), host_values(f32s[size_t(i)].grad()), shape, tol,
                std::string("gpt2_small attention: ") + names[i]);
}

// Compiled under bf16 autocast, the attention the model writes as matmul, softmax, matmul becomes
// the fused op (no [B, H, T, T] value in the optimized graph) and gives the eager results.
BOOST_AUTO_TEST_CASE(compiled_under_autocast_uses_the_fused_op, *needs(cudnn_unavailable_reason)) {
  EnableGradGuard grad;
  const int64_t B = 2, T = 96, H = 4, D = 32;
  // Scores of a few units, not tens: a near one-hot softmax makes the backward's dP - D cancel,
  // and bf16's rounding of P inside the fused kernel then dominates the gradient's error.
  Tensor x = random_tensor({B, T, 3 * H * D}, DType::f32, 81, -1, 1).to(kCuda);
  auto attend = [&](const Tensor& in) {
    AutocastGuard autocast(kCuda, DType::bf16);
    Tensor qkv = in * 1.5;  // a traced value, as a projection's output would be
    Tensor y = scaled_dot_product_attention(heads(qkv, 0, H, D), heads(qkv, H * D, H, D), heads(qkv, 2 * H * D, H, D),
                                            true);
    return (y.to(DType::f32) * y.to(DType::f32)).sum();
  };
  Tensor xe = x.detach().requires_grad_();
  Tensor eager = attend(xe);
  eager.backward();
  namespace fs = std::filesystem;
  std::string dir = (fs::temp_directory_path() / ("kiln-test-cuda-attention-" + std::to_string(::getpid()))).string();
  fs::remove_all(dir);
  set_debug_dir(dir);
  auto f = compile([&](const Tensor& in) { return attend(in); }, {.backend = "halide", .name = "attention"});
  Tensor xc = x.detach().requires_grad_();
  Tensor got = f(xc);
  got.backward();
  set_debug_dir("");
  std::string optimized = dumped(dir, ".optimized.txt");
  fs::remove_all(dir);
  // Eager and compiled each against plain loops in double on the same bf16 operands, not against
  // each other: cuDNN's plan is picked by timing on a graph's first call, so the two may run
  // different engines, and two bf16 roundings differ by more than either's error (3 of 73728
  // gradient elements past the bf16 tolerance once on an H200, in the full suite only).
  Tensor qkv = (x * 1.5).to(DType::bf16);
  Tensor q = heads(qkv, 0, H, D), k = heads(qkv, H * D, H, D), v = heads(qkv, 2 * H * D, H, D);
  const double scale = 1.0 / std::sqrt(double(D));
  const Shape head_shape{B, H, T, D};
  std::vector<double> exact = attention_reference(q, k, v, zeros(head_shape, {.dtype = DType::f64}), true, scale).out;
  // The model stores y in bf16 and the backward receives the loss's gradient 2y in bf16: the
  // reference rounds both as the model does (against exact values, 189 of 73728 gradient elements
  // of both eager and compiled, which agreed, were just past the tolerance on an H100).
  std::vector<double> y = host_values(from_vector(exact, head_shape).to(DType::bf16));
  double loss = 0;
  for (double& e : y) {
    loss += e * e;
    e *= 2;  // the loss's gradient
  }
  Tensor dy = from_vector(y, head_shape).to(DType::bf16);
  AttentionReference r = attention_reference(q, k, v, dy, true, scale);
  // x's gradient: 1.5 times each head's gradient, in the head's columns of x.
  std::vector<double> want(size_t(numel(x.shape())));
  const std::vector<double>* parts[] = {&r.dq, &r.dk, &r.dv};
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t part = 0; part < 3; ++part)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t d = 0; d < D; ++d)
            want[size_t(((b * T + t) * 3 + part) * H * D + h * D + d)] =
                1.5 * (*parts[part])[size_t(((b * H + h) * T + t) * D + d)];
  // The bf16 tolerance of outputs_and_gradients_match_a_double_reference, scaled by 1.5.
  const Tolerance grad_tol{3e-2, 3e-2};
  check_close(eager, {loss}, {}, {2e-2, 2e-2}, "eager attention under autocast: loss");
  check_close(got, {loss}, {}, {2e-2, 2e-2}, "compiled attention under autocast: loss");
  check_close(xe.grad(), want, x.shape(), grad_tol, "eager attention under autocast: grad");
  check_close(xc.grad(), want, x.shape(), grad_tol, "compiled attention under autocast: grad");
  BOOST_TEST(optimized.find("= attention(") != std::string::npos, optimized);
  BOOST_TEST(optimized.find("= softmax(") == std::string::npos, optimized);
}

// With merged_heads (what the compiler sets where the heads are merged after the attention) the
// output comes as [B, T, H, D], written so by cuDNN (bf16) and by the f32 path; outputs and the
// gradients through the op's derivative rule against plain loops in double.
BOOST_AUTO_TEST_CASE(merged_heads_output_matches_a_double_reference, *needs(cudnn_unavailable_reason)) {
  EnableGradGuard grad;
  const int64_t B = 2, H = 3, T = 80, D = 32;
  for (DType t : {DType::bf16, DType::f32}) {
    Tolerance tol = t == DType::bf16 ? Tolerance{3e-2, 2e-2} : Tolerance{1e-4, 1e-4};
    Tensor proj = random_tensor({B, T, 3 * H * D}, t, 95).to(kCuda).requires_grad_();
    Tensor q = heads(proj, 0, H, D), k = heads(proj, H * D, H, D), v = heads(proj, 2 * H * D, H, D);
    const double scale = 1.0 / std::sqrt(double(D));
    TensorList out = dispatch(op_def("attention"), {q, k, v}, {{"scale", scale}, {"causal", true}, {"merged_heads", true}});
    const std::string what = std::string("merged heads, ") + std::string(name(t));
    BOOST_TEST((out[0].shape() == Shape{B, T, H, D}), what);
    BOOST_TEST(out[0].is_contiguous(), what);
    Tensor dout = random_tensor({B, T, H, D}, t, 96).to(kCuda);
    (out[0] * dout).sum().backward();
    AttentionReference r = attention_reference(q, k, v, dout.transpose(1, 2), true, scale);
    check_close(out[0].transpose(1, 2), r.out, {B, H, T, D}, tol, what + ": out");
    check_close(heads(proj.grad(), 0, H, D), r.dq, {B, H, T, D}, tol, what + ": grad q");
    check_close(heads(proj.grad(), H * D, H, D), r.dk, {B, H, T, D}, tol, what + ": grad k");
    check_close(heads(proj.grad(), 2 * H * D, H, D), r.dv, {B, H, T, D}, tol, what + ": grad v");
  }
}

BOOST_AUTO_TEST_CASE(unsupported_combinations_name_the_op_and_the_rule, *needs_cuda()) {
  Tensor q = random_tensor({1, 2, 8, 12}, DType::bf16, 91).to(kCuda);
  check_error([&] { dispatch(op_def("attention"), {q, q, q}, {{"scale", 0.5}, {"causal", false}}); },
              {"attention", "bf16", "multiples of 8", "12"});
  // scaled_dot_product_attention itself writes such heads out with matmul and softmax.
  Tensor out = scaled_dot_product_attention(q, q, q, false);
  BOOST_TEST(out.dtype() == DType::bf16);
}
