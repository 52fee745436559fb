// The fused attention op (scaled_dot_product_attention and its backward): outputs and gradients
// against plain loops in double, causal and not, on strided views of one qkv tensor, in f32 and
// f64; and the errors its shape rule raises.
#include <algorithm>
#include <cmath>

#include "dsl/dispatch.h"
#include "support/reference.h"

using namespace kiln;
using namespace kiln::test;

namespace {

void check_against_reference(const Tensor& q0, const Tensor& k0, const Tensor& v0, bool causal, Tolerance tol,
                             const std::string& what) {
  Tensor q = q0.detach().requires_grad_(), k = k0.detach().requires_grad_(), v = v0.detach().requires_grad_();
  double scale = 1.0 / std::sqrt(double(q.size(3)));
  Tensor out = scaled_dot_product_attention(q, k, v, causal);
  Tensor dout = random_tensor(out.shape(), out.dtype(), 99);
  (out * dout).sum().backward();
  AttentionReference r = attention_reference(q0, k0, v0, dout, causal, scale);
  check_close(out, r.out, out.shape(), tol, what + ": out");
  check_close(q.grad(), r.dq, q.shape(), tol, what + ": grad q");
  check_close(k.grad(), r.dk, k.shape(), tol, what + ": grad k");
  check_close(v.grad(), r.dv, v.shape(), tol, what + ": grad v");
}

}  // namespace

BOOST_AUTO_TEST_CASE(outputs_and_gradients_match_a_double_reference) {
  EnableGradGuard grad;
  // 150 rows: full query blocks and a partial one, so causal blocks stop at different keys.
  for (bool causal : {true, false}) {
    std::string what = causal ? "causal" : "unmasked";
    check_against_reference(random_tensor({2, 3, 150, 16}, f32, 1), random_tensor({2, 3, 150, 16}, f32, 2),
                            random_tensor({2, 3, 150, 8}, f32, 3), causal, {2e-5, 2e-5}, what + " f32");
    check_against_reference(random_tensor({1, 2, 70, 8}, f64, 4), random_tensor({1, 2, 70, 8}, f64, 5),
                            random_tensor({1, 2, 70, 8}, f64, 6), causal, {1e-11, 1e-11}, what + " f64");
  }
  // Fewer queries than keys, and more (causal rows beyond the last key see every key).
  check_against_reference(random_tensor({1, 2, 5, 8}, f32, 7), random_tensor({1, 2, 90, 8}, f32, 8),
                          random_tensor({1, 2, 90, 4}, f32, 9), false, {2e-5, 2e-5}, "5 queries, 90 keys");
  check_against_reference(random_tensor({1, 1, 80, 8}, f32, 10), random_tensor({1, 1, 30, 8}, f32, 11),
                          random_tensor({1, 1, 30, 4}, f32, 12), true, {2e-5, 2e-5}, "causal, 80 queries, 30 keys");
}

BOOST_AUTO_TEST_CASE(strided_heads_of_one_projection_give_the_dense_result) {
  EnableGradGuard grad;
  // q, k, v as a transformer takes them: narrowed, unflattened and transposed views of [B, T, 3C].
  const int64_t B = 2, T = 100, H = 4, D = 8, C = H * D;
  Tensor qkv = random_tensor({B, T, 3 * C}, f32, 20);
  auto heads = [&](int64_t i) { return qkv.narrow(-1, i * C, C).unflatten(-1, {H, D}).transpose(1, 2); };
  BOOST_TEST(!heads(0).is_contiguous());
  check_against_reference(heads(0), heads(1), heads(2), true, {2e-5, 2e-5}, "views of qkv");
  // A last dim that is not dense is copied first.
  Tensor qt = random_tensor({1, 2, 8, 30}, f32, 21).transpose(-2, -1);
  check_against_reference(qt, random_tensor({1, 2, 30, 8}, f32, 22), random_tensor({1, 2, 30, 8}, f32, 23), false,
                          {2e-5, 2e-5}, "transposed q");
}

BOOST_AUTO_TEST_CASE(bad_operands_name_the_op_and_the_rule) {
  Tensor q = random_tensor({1, 2, 4, 8}, f32, 30), k = random_tensor({1, 2, 6, 8}, f32, 31),
         v = random_tensor({1, 2, 6, 4}, f32, 32);
  check_error([&] { scaled_dot_product_attention(q.flatten(0, 1), k, v); }, {"scaled_dot_product_attention", "4 dims", "[2, 4, 8]"});
  check_error([&] { scaled_dot_product_attention(q, k.flatten(0, 1), v); }, {"attention", "k must have 4 dims", "[2, 6, 8]"});
  check_error([&] { scaled_dot_product_attention(q, random_tensor({1, 2, 6, 7}, f32, 33), v); },
              {"attention", "same feature dim", "[1, 2, 4, 8]", "[1, 2, 6, 7]"});
  check_error([&] { scaled_dot_product_attention(q, k, random_tensor({1, 2, 5, 4}, f32, 34)); },
              {"attention", "same number of rows", "[1, 2, 5, 4]"});
  check_error([&] { scaled_dot_product_attention(q, k, v.to(f64)); }, {"attention", "f32", "f64", "(v)"});
  check_error([&] { scaled_dot_product_attention(q, random_tensor({1, 3, 6, 8}, f32, 35), v); },
              {"attention", "same batch and head dims"});
  // 16-bit attention is a CUDA kernel (cuDNN); on the CPU the op says so, and the function writes
  // it out with matmul and softmax instead.
  Tensor h = q.to(DType::bf16);
  check_error([&] { dispatch(op_def("attention"), {h, h, h}, {{"scale", 0.5}, {"causal", true}}); },
              {"attention", "no kernel for bf16 on cpu", "f32 and f64"});
  Tensor out = scaled_dot_product_attention(h, h, h, true);
  BOOST_TEST(out.dtype() == DType::bf16);
  check_close(out, host_values(scaled_dot_product_attention(h.to(f32), h.to(f32), h.to(f32), true)), out.shape(),
              {2e-2, 2e-2}, "bf16 attention on the CPU (matmul and softmax)");
}
