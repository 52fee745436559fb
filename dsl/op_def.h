// OpDef: everything kiln knows about one op, in one place:
//   - its shape and dtype rule (infer), which raises kiln::Error on bad input,
//   - its Halide definition (pointwise: one Expr from input Exprs; others: output Funcs from input
//     Funcs), used unchanged by the eager kernels built by generators/, and by compiled regions,
//   - for views, one record (ViewDef) with the rule that maps (shape, strides, offset) to the
//     view's metadata, used eagerly and while tracing, and the rule that maps each element of the
//     view to the input element it reads, used inside compiled pipelines,
//   - its schedule class, which picks the schedule template,
//   - whether it is differentiable; its derivative rule, written with Tensor ops, is autograd/'s
//     (derivative_rule(def), a table built once and never changed; a unary op's rule is written
//     on its line of dsl/ops/unary_ops.h).
// Ops are looked up by name: `const OpDef& d = op_def("exp");`.
#pragma once
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "dsl/attrs.h"
#include "dsl/device.h"
#include "dsl/dtype.h"
#include "dsl/shape.h"

namespace Halide {
class Expr;
}

namespace kiln {

struct HalideTensor;     // dsl/halide_def.h
struct ViewIndexShapes;  // dsl/halide_def.h

// gather: reads rows at indices (embedding); scatter: adds rows at indices (embedding_backward).
// custom: a user's op (dsl/custom_op.h), run through its own kernels between pipelines.
enum class ScheduleClass { pointwise, reduction, normalization, matmul, gather, scatter, data_movement, view, creation,
                           custom };
std::string_view name(ScheduleClass c);

// How the eager path runs the op: which generator family built its kernels.
enum class KernelFamily {
  unary, binary, where, cast,     // pointwise, canonical rank 4, broadcast through stride 0
  reduce,                         // [reduced, kept] -> [kept]
  rows,                           // [row, rows] -> [row, rows] (softmax, log_softmax)
  layer_norm, matmul, embedding, cross_entropy,
  copy,                           // strided copy: contiguous, cat, stack
  view,                           // metadata only, no kernel
  cat,                            // cat: each input copied into its slice of the output
  embedding_backward,             // scatter-add of rows
  creation,                       // no inputs: filled, ranges, random draws (host code)
  attention,                      // fused attention and its backward (dsl/eager/attention.cpp)
  custom,                         // a user's op: its registered kernels (dsl/custom_op.h)
};

// What autocast (dsl/autocast.h) does to the op's floating inputs (f64 ones are left alone, as in
// PyTorch). lower_precision: cast to the autocast dtype (bf16 or f16), the op then computes with
// f32 accumulation (matmul); f32: cast to f32, for ops whose sums or exponentials lose too much in
// 16 bits (softmax, layer_norm, cross_entropy, sum, mean, ...), which then return f32. none: the
// inputs as given; pointwise ops already promote to their widest input type.
enum class AutocastRule : uint8_t { none, lower_precision, f32 };

struct CustomOp;  // dsl/custom_op.h

struct TensorMeta {
  Shape shape;
  DType dtype = DType::f32;
  Device device;
  bool operator==(const TensorMeta&) const = default;
};
// "f32[4, 8] on cpu"
std::string to_string(const TensorMeta& m);

struct ViewMeta {
  Shape shape;
  Strides strides;
  int64_t offset = 0;
};

using ShapeRule = std::function<std::vector<TensorMeta>(const std::vector<TensorMeta>&, const Attrs&)>;
using PointwiseDef = std::function<Halide::Expr(const std::vector<Halide::Expr>&, const Attrs&)>;
using HalideDef = std::function<std::vector<HalideTensor>(const std::vector<HalideTensor>&, const Attrs&)>;
using ViewRule = std::function<ViewMeta(const ViewMeta& in, const Attrs&)>;
// The input index (kiln's order, outermost first) that the view's element at `out` reads.
using ViewIndexRule = std::function<std::vector<Halide::Expr>(const std::vector<Halide::Expr>& out,
                                                              const ViewIndexShapes&, const Attrs&)>;

// A view op's two rules, kept together (dsl/ops/views.cpp): its layout (strides and offset of the
// view of a strided input, no copy) and its index rule (which input element each output element
// reads), which must describe the same view.
struct ViewDef {
  ViewRule layout;
  ViewIndexRule index;
  // On a contiguous input, the same elements in the same (row-major) order: a reshape (view,
  // flatten, unflatten, squeeze, unsqueeze). A view of a reshape of x may view x directly.
  bool reshape = false;
  explicit operator bool() const { return bool(layout); }
};
struct OpDef {
  std::string name;
  ScheduleClass schedule_class = ScheduleClass::pointwise;
  KernelFamily family = KernelFamily::unary;
  int num_inputs = 1;  // -1: any number (cat, stack)
  ShapeRule infer;
  PointwiseDef pointwise;  // pointwise ops
  HalideDef define;        // other ops with kernels
  ViewDef view;            // views
  // Draws from the random generator: never merged, folded or dropped by graph passes, and a
  // compiled function draws fresh numbers on every call.
  bool random = false;
  // Communicates with other processes (dsl/distributed/functional.h's all-reduce ops): graph
  // passes never merge, drop or recompute it, and a compiled call that holds one is not replayed
  // as a CUDA graph. Every rank must run the same collectives in the same order.
  bool collective = false;
  // Whether a gradient flows through the op (autograd/ gives it a derivative rule). False for
  // comparisons and indices (argmax), for detach, and for ops that only run inside a backward
  // (embedding_backward, attention_backward, gelu_backward: no higher-order gradients yet).
  // Creation ops have no inputs to differentiate.
  bool differentiable = true;
  // eq, ne, lt, le, gt, ge: a bool mask that graph passes recompute exactly from its inputs
  // rather than save, and whose inputs keep the bits they had when it was computed.
  bool comparison = false;
  // Its definition compares its input's values with a reduction of them (argmax: the first index
  // where x == max(x)). A fused region stores such an input when it computes it, so that both
  // reads see the same bits (recomputed, x * 0.5 + 0.25 == max became x * 0.5 == max - 0.25 in
  // Halide's simplifier, and no element matched).
  bool compares_with_own_reduction = false;
  // A few instructions an element (add, mul, a comparison, where, neg, cast, ...): a fused region
  // computes it again wherever it is read rather than store and load it.
  bool cheap = false;
  // A matrix product [..., M, K] x [K, N] or batched, with an optional epilogue (matmul,
  // matmul_bias, matmul_bias_gelu, ...): GEMM schedules, weight packing and cuBLAS apply to it.
  bool gemm = false;
  // Reads indices or class targets that its eager runner checks on the host before any read
  // (embedding, cross_entropy): never lowered into a pipeline, where a bad index would read out of
  // bounds.
  bool host_checked = false;
  // Pointwise ops: the input read as a bool mask (where's condition); -1 when none. The other
  // inputs are converted to the compute dtype.
  int condition_input = -1;
  AutocastRule autocast = AutocastRule::none;
  // Pointwise ops: the dtype the inputs are converted to before the kernel runs (comparisons
  // compute in the promoted input type and return bool). Unset: the first output's dtype.
  std::function<DType(const std::vector<TensorMeta>&)> compute_dtype;
  // A custom op's registration (kernels, derivative rule); null for kiln's own ops.
  const CustomOp* custom = nullptr;

  // Runs exactly as often as the program calls it (a random draw, a collective): graph passes
  // never merge, drop or recompute it.
  bool effectful() const { return random || collective; }
};

// The registry of all ops; built on first use from the op tables in dsl/ops/.
const OpDef& op_def(std::string_view name);
// Null where no op has the name.
const OpDef* find_op_def(std::string_view name);
std::vector<const OpDef*> all_op_defs();
// Adds an op after the tables (a custom op, dsl/custom_op.h's register_op): kiln::Error if the
// name is taken. The OpDef stays at its address for the life of the process.
const OpDef& add_op_def(OpDef def);

}  // namespace kiln
