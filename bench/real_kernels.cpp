#include "bench/real_kernels.h"

#include "dsl/dispatch.h"
#include "dsl/op_def.h"

namespace kiln::bench {

namespace {

using Fn = std::function<std::vector<Tensor>(std::vector<Tensor>)>;
using Tensors = std::vector<Tensor>;

constexpr int64_t kTokens = 8192, kVocab = 50304, kWidth = 768;

// AdamW's update as optim::AdamW writes it (PyTorch's defaults, weight decay 0.01), the bias
// corrections from a 0-d step count: p, g, m, v, step -> p', m', v'.
Tensors adamw_update(Tensors x) {
  const double lr = 1e-3, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.01;
  const Tensor &p = x[0], &g = x[1], &m = x[2], &v = x[3], &step = x[4];
  Tensor m2 = m * b1 + g * (1 - b1);
  Tensor v2 = v * b2 + square(g) * (1 - b2);
  Tensor c1 = 1.0 - pow(full({}, b1, step.options()), step);
  Tensor c2 = 1.0 - pow(full({}, b2, step.options()), step);
  Tensor p2 = p * (1 - lr * wd) - (m2 / c1) / (sqrt(v2 / c2) + eps) * lr;
  return {p2, m2, v2};
}

// The derivatives as the derivative rules run them: eagerly the fused backward op, traced (the
// compiled column) the composite formula.
Tensors fused(const char* op, const Tensors& in, const Attrs& a) { return dispatch(op_def(op), in, a); }

Tensors softmax_backward(Tensors x) {
  const Tensor &y = x[0], &dy = x[1];
  if (!y.is_traced()) return fused("softmax_backward", {y, dy}, {{"dim", int64_t(-1)}});
  return {y * (dy - sum(y * dy, {-1}, true))};
}

Tensors log_softmax_backward(Tensors x) {
  const Tensor &y = x[0], &dy = x[1];
  if (!y.is_traced()) return fused("log_softmax_backward", {y, dy}, {{"dim", int64_t(-1)}});
  return {dy - exp(y) * sum(dy, {-1}, true)};
}

Tensors layer_norm_backward(Tensors x) {
  const Tensor &in = x[0], &w = x[1], &dy = x[2];
  if (!in.is_traced())
    return fused("layer_norm_backward", {in, dy, w}, {{"normalized_shape", Shape{in.size(-1)}}, {"eps", 1e-5}});
  Tensor xc = in - mean(in, {-1}, true);
  Tensor rstd = rsqrt(mean(xc * xc, {-1}, true) + 1e-5);
  Tensor xhat = xc * rstd, g = dy * w;
  return {rstd * (g - mean(g, {-1}, true) - xhat * mean(g * xhat, {-1}, true))};
}

// From the forward's log-sum-exp of each row (x[2]), as the rule does.
Tensors cross_entropy_backward(Tensors x) {
  const Tensor &logits = x[0], &t = x[1], &lse = x[2];
  if (!logits.is_traced())
    return fused("cross_entropy_backward", {logits, t, lse, full({}, 1.0, logits.options())}, {});
  Tensor p = exp(logits - lse.unsqueeze(-1));
  Tensor classes = arange(0, double(logits.size(-1)), 1, {.dtype = DType::i32, .device = logits.device()});
  Tensor onehot = eq(t.to(DType::i32).unsqueeze(-1), classes).to(logits.dtype());  // compared in i32, as the rule does
  // The rule's formula: p read once (where(onehot, p - 1, p) read it twice, and the compiled
  // kernel stored p to read it back).
  return {(p - onehot) * (1.0 / double(logits.size(0)))};
}

Tensors embedding_backward(Tensors x) {
  return dispatch(op_def("embedding_backward"), {x[0], x[1]}, Attrs{{"num_rows", kVocab}});
}

double f32_bytes(const Shape& s, double passes) { return passes * 4 * double(numel(s)); }

}  // namespace

std::vector<RealKernel> real_kernels(Device d) {
  auto normal = [d](Shape s) { return [d, s] { return Tensors{randn(s, {.device = d})}; }; };
  auto two = [d](Shape s) { return [d, s] { return Tensors{randn(s, {.device = d}), randn(s, {.device = d})}; }; };
  auto tokens = [d](int64_t high) { return randint(0, high, {kTokens}).to(d); };
  std::vector<RealKernel> k;
  auto row_case = [&](std::string name, Shape s, Fn fn, double passes) {
    k.push_back({std::move(name), s, f32_bytes(s, passes), std::move(fn), normal(s)});
  };
  const Shape big{int64_t(64) << 20}, table{kVocab, kWidth}, logits{kTokens, kVocab};
  k.push_back({"pointwise_axpb", big, f32_bytes(big, 3), [](Tensors x) { return Tensors{x[0] * 2.0 + x[1]}; }, two(big)});
  k.push_back({"adamw_update", table, f32_bytes(table, 7), adamw_update, [d, table] {
                 return Tensors{randn(table, {.device = d}), randn(table, {.device = d}), randn(table, {.device = d}),
                                abs(randn(table, {.device = d})), full({}, 10.0, {.device = d})};
               }});
  for (auto [name, s] : {std::pair<std::string, Shape>{"softmax_rows_64", {1 << 20, 64}},
                         {"softmax_rows_1024", {65536, 1024}},
                         {"softmax_rows", {8192, 4096}},
                         {"softmax_rows_50304", logits}})
    row_case(name, s, [](Tensors x) { return Tensors{softmax(x[0], -1)}; }, 2);
  row_case("log_softmax_rows_50304", logits, [](Tensors x) { return Tensors{log_softmax(x[0], -1)}; }, 2);
  for (auto [name, s] : {std::pair<std::string, Shape>{"layernorm_rows_768", {65536, 768}},
                         {"layernorm_rows", {8192, 4096}}}) {
    int64_t c = s[1];
    k.push_back({name, s, f32_bytes(s, 2),
                 [c](Tensors x) { return Tensors{layer_norm(x[0], {c}, x[1], x[2])}; },
                 [d, s, c] {
                   return Tensors{randn(s, {.device = d}), randn({c}, {.device = d}), randn({c}, {.device = d})};
                 }});
  }
  row_case("logsumexp_rows_50304", logits, [](Tensors x) { return Tensors{logsumexp(x[0], {-1})}; }, 1);
  k.push_back({"cross_entropy_50304", logits, f32_bytes(logits, 1),
               [](Tensors x) { return Tensors{cross_entropy(x[0], x[1])}; },
               [d, logits, tokens] { return Tensors{randn(logits, {.device = d}), tokens(kVocab)}; }});
  k.push_back({"softmax_bwd_rows_50304", logits, f32_bytes(logits, 3), softmax_backward, [d, logits] {
                 return Tensors{softmax(randn(logits, {.device = d}), -1), randn(logits, {.device = d})};
               }});
  k.push_back({"log_softmax_bwd_rows_50304", logits, f32_bytes(logits, 3), log_softmax_backward, [d, logits] {
                 return Tensors{log_softmax(randn(logits, {.device = d}), -1), randn(logits, {.device = d})};
               }});
  k.push_back({"layernorm_bwd_rows", {8192, 4096}, f32_bytes({8192, 4096}, 3), layer_norm_backward, [d] {
                 return Tensors{randn({8192, 4096}, {.device = d}), randn({4096}, {.device = d}),
                                randn({8192, 4096}, {.device = d})};
               }});
  k.push_back({"cross_entropy_bwd_50304", logits, f32_bytes(logits, 2), cross_entropy_backward, [d, logits, tokens] {
                 Tensor x = randn(logits, {.device = d});
                 return Tensors{x, tokens(kVocab), logsumexp(x, {-1})};
               }});
  row_case("column_sum", {kTokens, 3072}, [](Tensors x) { return Tensors{sum(x[0], {0})}; }, 1);
  row_case("full_sum", big, [](Tensors x) { return Tensors{sum(x[0])}; }, 1);
  k.push_back({"embedding_50304", table, 2.0 * 4 * kTokens * kWidth,
               [](Tensors x) { return Tensors{embedding(x[0], x[1])}; },
               [d, table, tokens] { return Tensors{randn(table, {.device = d}), tokens(kVocab)}; }});
  k.push_back({"embedding_bwd_50304", table, 4.0 * double(kTokens * kWidth + kVocab * kWidth), embedding_backward,
               [d, tokens] { return Tensors{randn({kTokens, kWidth}, {.device = d}), tokens(kVocab)}; }});
  row_case("transpose_copy", {kTokens, 3072}, [](Tensors x) { return Tensors{contiguous(x[0].t())}; }, 2);
  row_case("permute_heads", {16, 1024, 16, 64}, [](Tensors x) { return Tensors{contiguous(permute(x[0], {0, 2, 1, 3}))}; }, 2);
  return k;
}

}  // namespace kiln::bench
