// The op functions of the Tensor API. Each one builds its attributes and goes through dispatch(),
// so the same call runs eagerly, records autograd, or is traced into a graph.
//
//   Tensor y = gelu(matmul(x, w) + b);
//   Tensor p = softmax(y, -1);
//   Tensor loss = cross_entropy(logits, targets);
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "dsl/tensor.h"
#include "dsl/unary_functions.h"  // generated: the unary ops' declarations (cmake/unary_functions.cmake)

namespace kiln {

// Unary: `Tensor name(const Tensor& x)` for each op of dsl/ops/unary_ops.h's list (neg, abs, exp,
// sin, ...; integer inputs of float ops compute in f32), declared in the generated
// dsl/unary_functions.h, which changes only when an op is added or removed.
Tensor gelu(const Tensor& x, const std::string& approximate = "none");  // or "tanh"
// grad * d/dx gelu(x), in one kernel: gelu's backward.
Tensor gelu_backward(const Tensor& grad, const Tensor& x, const std::string& approximate = "none");
// True where x is neither infinite nor NaN (bool; all true for integers).
Tensor isfinite(const Tensor& x);

// Binary, with numpy broadcasting and type promotion; comparisons return bool.
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);

// Scalar overloads: the scalar is a 0-d tensor that does not widen a float tensor's dtype.
Tensor scalar_like(double v, const Tensor& like);
#define KILN_SCALAR_OVERLOADS(fn)                                                          \
  inline Tensor fn(const Tensor& a, double b) { return fn(a, scalar_like(b, a)); }         \
  inline Tensor fn(double a, const Tensor& b) { return fn(scalar_like(a, b), b); }
KILN_SCALAR_OVERLOADS(add)
KILN_SCALAR_OVERLOADS(sub)
KILN_SCALAR_OVERLOADS(mul)
KILN_SCALAR_OVERLOADS(div)
KILN_SCALAR_OVERLOADS(pow)
KILN_SCALAR_OVERLOADS(maximum)
KILN_SCALAR_OVERLOADS(minimum)
KILN_SCALAR_OVERLOADS(eq)
KILN_SCALAR_OVERLOADS(ne)
KILN_SCALAR_OVERLOADS(lt)
KILN_SCALAR_OVERLOADS(le)
KILN_SCALAR_OVERLOADS(gt)
KILN_SCALAR_OVERLOADS(ge)
#undef KILN_SCALAR_OVERLOADS
inline Tensor where(const Tensor& c, const Tensor& a, double b) { return where(c, a, scalar_like(b, a)); }
inline Tensor where(const Tensor& c, double a, const Tensor& b) { return where(c, scalar_like(a, b), b); }

inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator+(const Tensor& a, double b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, double b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, double b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, double b) { return div(a, b); }
inline Tensor operator+(double a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(double a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(double a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(double a, const Tensor& b) { return div(a, b); }
inline Tensor operator-(const Tensor& x) { return neg(x); }

Tensor cast(const Tensor& x, DType t);

// Reductions over `dims` (empty: all dims). sum of integers gives i64; var uses `correction`
// (1: unbiased). max/min return values; argmax returns i64 indices of the first maximum.
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor max(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor min(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor var(const Tensor& x, const std::vector<int64_t>& dims = {}, int64_t correction = 1, bool keepdim = false);
Tensor logsumexp(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);

// Matmul: 1-D and 2-D operands, and batched with broadcast batch dims. linear: x W^T + b.
Tensor matmul(const Tensor& a, const Tensor& b);
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

// Neural-network functions.
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);
Tensor embedding(const Tensor& weight, const Tensor& indices);  // rows of weight, indices i64/i32
Tensor cross_entropy(const Tensor& logits, const Tensor& targets);  // (N, C) logits, (N) i64, mean
// softmax(scale * q k^T) v over (batch, heads, rows, features) operands. causal: query i sees keys
// j <= i only. scale 0 means 1/sqrt(features). Eagerly one fused op where a kernel exists (see
// fused_attention_supported), keeping no [rows, rows] scores for the backward, else the
// matmul-softmax chain; traced, the chain, which the compiler fuses (graph/fuse_attention.cpp).
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal = false,
                                    double scale = 0);
// Whether the fused attention op has a kernel for this dtype, device and head sizes: f32 and f64
// on the CPU (a fused kernel); f32 on CUDA (cuBLAS GEMMs around one probabilities kernel); bf16 and
// f16 on CUDA (cuDNN's flash attention, when cuDNN loads and the head sizes are multiples of 8 up
// to 128).
bool fused_attention_supported(DType dtype, const Device& device, int64_t head_dim, int64_t value_dim);

// Data movement. Views share storage; contiguous/cat/stack copy.
Tensor reshape(const Tensor& x, const Shape& shape);
Tensor view(const Tensor& x, const Shape& shape);
Tensor permute(const Tensor& x, const std::vector<int64_t>& dims);
Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1);
Tensor expand(const Tensor& x, const Shape& shape);
Tensor squeeze(const Tensor& x);
Tensor squeeze(const Tensor& x, int64_t dim);
Tensor unsqueeze(const Tensor& x, int64_t dim);
Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length);
Tensor flatten(const Tensor& x, int64_t start_dim = 0, int64_t end_dim = -1);  // a view, else a copy
Tensor unflatten(const Tensor& x, int64_t dim, const Shape& sizes);  // one size may be -1
Tensor contiguous(const Tensor& x);  // always a fresh dense copy
Tensor cat(const std::vector<Tensor>& xs, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& xs, int64_t dim = 0);

}  // namespace kiln
