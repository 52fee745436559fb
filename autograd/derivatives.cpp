#include "autograd/derivatives.h"

#include <cmath>
#include <cstdint>
#include <functional>
#include <numeric>
#include <unordered_map>
#include <algorithm>

#include "dsl/composite_math.h"
#include "dsl/creation.h"
#include "dsl/dispatch.h"
#include "dsl/error.h"
#include "dsl/functions.h"
#include "dsl/ops/unary_ops.h"

namespace kiln {

namespace {

using Rule = DerivativeRule;

// A bool tensor as 0/1 values of `like`'s dtype.
Tensor mask(const Tensor& b, const Tensor& like) { return b.to(like.dtype()); }

// Binary rules return gradients in the broadcast shape; sum them back to each input.
TensorList to_inputs(const TensorList& in, Tensor ga, Tensor gb) {
  return {ga.defined() ? sum_to(ga, in[0].shape()) : ga, gb.defined() ? sum_to(gb, in[1].shape()) : gb};
}

// Gradient of a reduction over attrs "dims" (keepdim or not) spread back over the input shape.
Tensor expand_reduced(const Tensor& g, const Tensor& x, const Attrs& a) {
  std::vector<int> dims = wrap_dims("backward", a.get<std::vector<int64_t>>("dims"), x.dim());
  Tensor e = g;
  if (!a.get_or<bool>("keepdim", false))
    for (int d : dims) e = e.unsqueeze(d);
  return e.expand(x.shape());
}

Tensor slice_backward(const Tensor& g, const Tensor& x, const Attrs& a) {
  int d = wrap_dim("slice", a.get<int64_t>("dim"), x.dim());
  int64_t n = x.size(d), step = a.get<int64_t>("step");
  int64_t start = a.get<int64_t>("start");
  if (start < 0) start += n;
  start = std::clamp<int64_t>(start, 0, n);
  auto zeros_along = [&](int64_t len, const Tensor& like, int dim) {
    Shape s = like.shape();
    s[dim] = len;
    return zeros(s, like.options());
  };
  Tensor spread = g;
  if (step > 1) {  // put each gradient row `step` apart: [g, 0 x (step-1)] per row, flattened
    Tensor rows = g.unsqueeze(d + 1);
    spread = cat({rows, zeros_along(step - 1, rows, d + 1)}, d + 1);
    Shape s = g.shape();
    s[d] *= step;
    spread = spread.reshape(s).narrow(d, 0, std::min(s[d], n - start));
  }
  int64_t after = n - start - spread.size(d);
  TensorList parts;  // no zero-length blocks: an empty tensor in a graph is a value for nothing
  if (start > 0) parts.push_back(zeros_along(start, spread, d));
  parts.push_back(spread);
  if (after > 0) parts.push_back(zeros_along(after, spread, d));
  return parts.size() == 1 ? spread : cat(parts, d);
}

// max/min over dims: the gradient goes to the elements equal to the result, split evenly
// between ties.
Tensor extremum_backward(const Tensor& g, const Tensor& x, const Tensor& y, const Attrs& a) {
  Tensor hit = eq(x, expand_reduced(y, x, a)).to(x.dtype());
  Attrs keep = a;
  keep.set("keepdim", true);
  Tensor count = expand_reduced(sum(hit, a.get<std::vector<int64_t>>("dims"), true), x, keep);
  return expand_reduced(g, x, a) * hit / count;
}

std::vector<int64_t> last_dims(const Tensor& x, size_t k) {
  std::vector<int64_t> dims;
  for (size_t i = 0; i < k; ++i) dims.push_back(x.dim() - int64_t(k) + int64_t(i));
  return dims;
}

// Whether a backward runs on real tensors (eager autograd), where a rule's fused backward op is one
// kernel instead of the composite's several. A traced backward (a compiled training step) keeps
// the composite: its primitives fuse with their neighbours into the step's pipelines.
bool eager(const TensorList& tensors) {
  return std::none_of(tensors.begin(), tensors.end(), [](const Tensor& t) { return t.defined() && t.is_traced(); });
}

// layer_norm over the last dims, recomputing mean and 1/std from the input.
TensorList layer_norm_backward(const TensorList& in, const Tensor& g, const Attrs& a) {
  const Tensor& x = in[0];
  if (eager({x, g})) {  // the fused op for x's gradient; the affine parameters' from x normalized
    TensorList fused_in{x, g};
    if (in.size() == 3) fused_in.push_back(in[1]);
    Tensor gx = dispatch(op_def("layer_norm_backward"), fused_in, a)[0];
    if (in.size() == 1) return {gx};
    Tensor xhat = dispatch(op_def("layer_norm"), {x}, a)[0];
    return {gx, sum_to(g * xhat, in[1].shape()), sum_to(g, in[2].shape())};
  }
  std::vector<int64_t> dims = last_dims(x, a.get<std::vector<int64_t>>("normalized_shape").size());
  auto [centered, rstd, xhat] = normalize_rows(x, dims, a.get<double>("eps"));
  Tensor gxhat = in.size() == 3 ? g * in[1] : g;
  Tensor gx = rstd * (gxhat - mean(gxhat, dims, true) - xhat * mean(gxhat * xhat, dims, true));
  if (in.size() == 1) return {gx};
  return {gx, sum_to(g * xhat, in[1].shape()), sum_to(g, in[2].shape())};
}

// Rows of a one-hot encoding of integer `indices` over `classes`, in `dtype`. Compared in i32
// where the classes fit (cross_entropy checks its targets' range first): a compiled row of i64
// values would load one element at a time.
Tensor one_hot(const Tensor& indices, int64_t classes, DType dtype) {
  DType t = classes <= INT32_MAX ? DType::i32 : indices.dtype();
  Tensor range = arange(0, double(classes), 1, {.dtype = t, .device = indices.device()});
  return eq(indices.to(t).unsqueeze(-1), range).to(dtype);
}

TensorList matmul_backward(const TensorList& in, const Tensor& g, const std::vector<bool>& need) {
  const Tensor &a = in[0], &b = in[1];
  Tensor A = a.dim() == 1 ? a.unsqueeze(0) : a;
  Tensor B = b.dim() == 1 ? b.unsqueeze(-1) : b;
  Shape gs(g.shape());
  if (a.dim() == 1) gs.insert(gs.end() - (b.dim() == 1 ? 0 : 1), 1);
  if (b.dim() == 1) gs.push_back(1);
  Tensor G = g.reshape(gs);
  Tensor ga = need[0] ? sum_to(matmul(G, B.transpose(-1, -2)), A.shape()).reshape(a.shape()) : Tensor();
  if (!need[1]) return {ga, Tensor()};
  // b shared by every batch of a (a Linear on [B, T, C]): its gradient is one GEMM over all
  // B*T rows, not a GEMM per batch summed afterwards (B times the output, and short K).
  if (B.dim() == 2 && A.dim() > 2) {
    Tensor gb = matmul(A.flatten(0, -2).transpose(0, 1), G.flatten(0, -2));
    return {ga, b.dim() == 1 ? gb.reshape(b.shape()) : gb};
  }
  Tensor gb = sum_to(matmul(A.transpose(-1, -2), G), B.shape()).reshape(b.shape());
  return {ga, gb};
}

struct Entry {
  const char* op;
  Rule rule;
};

// in: inputs, out: outputs, g: output gradients, a: attributes, need: which inputs want a gradient.
#define RULE                                                                                    \
  []([[maybe_unused]] const TensorList& in, [[maybe_unused]] const TensorList& out,            \
     [[maybe_unused]] const TensorList& g, [[maybe_unused]] const Attrs& a,                    \
     [[maybe_unused]] const std::vector<bool>& need) -> TensorList
// The unary ops of dsl/ops/unary_ops.h: their derivative column, as Tensor code of x, y and g.
#define KILN_UNARY_RULE(name, result, cheap, definition, derivative)                                       \
  {#name, [](const TensorList& in, const TensorList& out, const TensorList& grads, const Attrs&,             \
             const std::vector<bool>&) -> TensorList {                                                     \
     [[maybe_unused]] const Tensor &x = in[0], &y = out[0];                                                \
     const Tensor& g = grads[0];                                                                           \
     return {derivative};                                                                                  \
   }},

std::vector<Entry> rules() {
  return {
      KILN_UNARY_OPS(KILN_UNARY_RULE)
#undef KILN_UNARY_RULE
      {"gelu", RULE { return {gelu_backward(g[0], in[0], a.get_or<std::string>("approximate", "none"))}; }},
      {"add", RULE { return to_inputs(in, need[0] ? g[0] : Tensor(), need[1] ? g[0] : Tensor()); }},
      {"sub", RULE { return to_inputs(in, need[0] ? g[0] : Tensor(), need[1] ? neg(g[0]) : Tensor()); }},
      {"mul", RULE {
         return to_inputs(in, need[0] ? g[0] * in[1] : Tensor(), need[1] ? g[0] * in[0] : Tensor());
       }},
      {"div", RULE {
         return to_inputs(in, need[0] ? g[0] / in[1] : Tensor(), need[1] ? -g[0] * in[0] / square(in[1]) : Tensor());
       }},
      {"pow", RULE {
         Tensor ga = need[0] ? g[0] * in[1] * pow(in[0], in[1] - 1.0) : Tensor();
         Tensor gb = need[1] ? g[0] * out[0] * log(where(gt(in[0], 0.0), in[0], 1.0)) : Tensor();
         return to_inputs(in, ga, gb);
       }},
      // Ties split the gradient evenly. Written with where() rather than a 0/1 mask times 0.5:
      // Halide 14 mis-compiles float(bool) * 0.5 (a widening multiply by a half constant).
      {"maximum", RULE {
         Tensor tie = where(eq(in[0], in[1]), g[0] * 0.5, 0.0);
         return to_inputs(in, where(gt(in[0], in[1]), g[0], tie), where(lt(in[0], in[1]), g[0], tie));
       }},
      {"minimum", RULE {
         Tensor tie = where(eq(in[0], in[1]), g[0] * 0.5, 0.0);
         return to_inputs(in, where(lt(in[0], in[1]), g[0], tie), where(gt(in[0], in[1]), g[0], tie));
       }},
      {"where", RULE {
         return {Tensor(), need[1] ? sum_to(where(in[0], g[0], 0.0), in[1].shape()) : Tensor(),
                 need[2] ? sum_to(where(in[0], 0.0, g[0]), in[2].shape()) : Tensor()};
       }},
      {"cast", RULE { return {g[0].to(in[0].dtype())}; }},
      {"view", RULE { return {g[0].reshape(in[0].shape())}; }},
      {"squeeze", RULE { return {g[0].reshape(in[0].shape())}; }},
      {"flatten", RULE { return {g[0].reshape(in[0].shape())}; }},
      {"unflatten", RULE { return {g[0].reshape(in[0].shape())}; }},
      {"unsqueeze", RULE { return {g[0].reshape(in[0].shape())}; }},
      {"expand", RULE { return {sum_to(g[0], in[0].shape())}; }},
      {"transpose", RULE { return {g[0].transpose(a.get<int64_t>("dim0"), a.get<int64_t>("dim1"))}; }},
      {"permute", RULE {
         const auto& dims = a.get<std::vector<int64_t>>("dims");
         std::vector<int64_t> inverse(dims.size());
         for (size_t i = 0; i < dims.size(); ++i) inverse[wrap_dim("permute", dims[i], int64_t(dims.size()))] = int64_t(i);
         return {g[0].permute(inverse)};
       }},
      {"slice", RULE { return {slice_backward(g[0], in[0], a)}; }},
      {"contiguous", RULE { return {g[0]}; }},
      {"sum", RULE { return {expand_reduced(g[0], in[0], a)}; }},
      {"mean", RULE {
         double count = double(in[0].numel()) / double(std::max<int64_t>(out[0].numel(), 1));
         return {expand_reduced(g[0], in[0], a) / count};
       }},
      {"matmul", RULE { return matmul_backward(in, g[0], need); }},
      {"max", RULE { return {extremum_backward(g[0], in[0], out[0], a)}; }},
      {"min", RULE { return {extremum_backward(g[0], in[0], out[0], a)}; }},
      {"var", RULE {
         const Tensor& x = in[0];
         Tensor centered = x - mean(x, a.get<std::vector<int64_t>>("dims"), true);
         double n = double(x.numel()) / double(std::max<int64_t>(out[0].numel(), 1));
         return {expand_reduced(g[0], x, a) * centered * (2.0 / (n - double(a.get<int64_t>("correction"))))};
       }},
      {"logsumexp", RULE { return {expand_reduced(g[0], in[0], a) * exp(in[0] - expand_reduced(out[0], in[0], a))}; }},
      {"softmax", RULE {
         if (eager({out[0], g[0]})) return dispatch(op_def("softmax_backward"), {out[0], g[0]}, a);
         int64_t d = a.get<int64_t>("dim");
         return {out[0] * (g[0] - sum(g[0] * out[0], {d}, true))};
       }},
      {"log_softmax", RULE {
         if (eager({out[0], g[0]})) return dispatch(op_def("log_softmax_backward"), {out[0], g[0]}, a);
         return {g[0] - exp(out[0]) * sum(g[0], {a.get<int64_t>("dim")}, true)};
       }},
      {"layer_norm", RULE { return layer_norm_backward(in, g[0], a); }},
      {"attention", RULE {  // the fused kernel's own backward, from the saved log-sum-exp
         KILN_CHECK(g.size() < 2 || !g[1].defined(), "attention: its log-sum-exp output carries no gradient");
         if (!g[0].defined()) return {};
         if (a.get_or<bool>("merged_heads", false))  // out as [B, Tq, H, Dv]: the backward reads it as [B, H, Tq, Dv]
           return dispatch(op_def("attention_backward"),
                           {in[0], in[1], in[2], out[0].transpose(1, 2), g[0].transpose(1, 2), out[1]}, a);
         return dispatch(op_def("attention_backward"), {in[0], in[1], in[2], out[0], g[0], out[1]}, a);
       }},
      {"cross_entropy", RULE {  // from the forward's log-sum-exp of each row: one pass over the logits
         const Tensor &logits = in[0], &targets = in[1], &lse = out[1];
         KILN_CHECK(g.size() < 2 || !g[1].defined(), "cross_entropy: its log-sum-exp output carries no gradient");
         if (eager({logits, targets, lse, g[0]}))
           return {dispatch(op_def("cross_entropy_backward"), {logits, targets, lse, g[0]}, a)[0], Tensor()};
         int64_t rows = logits.dim() == 2 ? logits.size(0) : 1;
         Tensor target_rows = one_hot(targets, logits.size(-1), logits.dtype());
         return {(exp(logits - lse.unsqueeze(-1)) - target_rows) * (g[0] / double(rows)), Tensor()};
       }},
      {"embedding", RULE {  // scatter-add of the gradient rows into the table
         Attrs rows{{"num_rows", in[0].size(0)}};
         return {dispatch(op_def("embedding_backward"), {g[0], in[1]}, rows)[0], Tensor()};
       }},
      {"cat", RULE {
         int64_t d = a.get<int64_t>("dim");
         TensorList grads;
         int64_t offset = 0;
         for (const Tensor& x : in) {
           if (x.dim() == 1 && x.size(0) == 0 && g[0].dim() != 1) {  // skipped like PyTorch
             grads.push_back(zeros(x.shape(), g[0].options()));
             continue;
           }
           int64_t len = x.size(d);
           grads.push_back(g[0].narrow(d, offset, len));
           offset += len;
         }
         return grads;
       }},
  };
}
#undef RULE

}  // namespace

Tensor sum_to(const Tensor& g, const Shape& shape) {
  if (g.shape() == shape) return g;
  int64_t lead = g.dim() - int64_t(shape.size());
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < g.dim(); ++d)
    if (d < lead || (shape[d - lead] == 1 && g.size(d) != 1)) dims.push_back(d);
  Tensor s = dims.empty() ? g : sum(g, dims, true);
  return s.reshape(shape);
}

namespace {

// The table, checked against the registry when it is built.
const std::unordered_map<const OpDef*, Rule>& rule_table() {
  static const std::unordered_map<const OpDef*, Rule> table = [] {
    std::unordered_map<const OpDef*, Rule> t;
    for (Entry& e : rules()) {
      const OpDef& def = op_def(e.op);
      KILN_CHECK(is_differentiable(def), "derivative rules: op '", e.op,
                 "' has a rule but its OpDef says it is not differentiable");
      KILN_CHECK(t.emplace(&def, std::move(e.rule)).second, "derivative rules: op '", e.op, "' has two rules");
    }
    for (const OpDef* def : all_op_defs())
      KILN_CHECK(def->custom || !is_differentiable(*def) || t.count(def), "derivative rules: op '", def->name,
                 "' is differentiable (OpDef::differentiable) but has no rule in autograd/derivatives.cpp");
    return t;
  }();
  return table;
}

}  // namespace

const DerivativeRule& derivative_rule(const OpDef& def) {
  if (def.custom) {
    KILN_CHECK(def.custom->differentiable, "backward: op ", def.name, " is marked non-differentiable");
    return def.custom->backward;  // register_op gives one that raises where the user gave none
  }
  auto it = rule_table().find(&def);
  KILN_CHECK(it != rule_table().end(), "backward: op ", def.name, " has no derivative rule (it is not differentiable)");
  return it->second;
}

bool is_differentiable(const OpDef& def) {
  return def.differentiable && def.schedule_class != ScheduleClass::creation;  // creation: no inputs
}

std::vector<std::string> ops_with_derivatives() {
  std::vector<std::string> names;
  for (const auto& [def, rule] : rule_table()) names.push_back(def->name);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace kiln
