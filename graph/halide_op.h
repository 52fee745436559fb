// Ops defined by a Halide expression: a user's op that kiln compiles, fuses and differentiates
// like its own pointwise ops (the other kind of custom op, with C++ or CUDA kernels kiln cannot
// see into, is dsl/custom_op.h's register_op).
//
//   const OpDef& op = register_halide_op({
//       .name = "myns::swish",
//       .num_inputs = 2,
//       .pointwise = [](const std::vector<Halide::Expr>& v, const Attrs&) {
//         return v[0] / (1.0f + Halide::exp(-v[1] * v[0])); }});
//   Tensor y = call_op(op, {x, beta})[0];
//
// The definition gives one output element from its inputs' elements (inputs broadcast as in
// add(); 16-bit floats arrive as f32 and the result is stored back in the output's dtype).
//   - Eagerly the op runs through a pipeline that kiln compiles from the definition on first use
//     (for each input dtype, rank and device; sizes become symbolic when they change) and keeps in
//     its disk cache; CPU and CUDA alike.
//   - Inside compile() it is a node like add's: fused into the neighbouring pipelines, recomputed
//     rather than saved where that is cheaper.
//   - Without a derivative rule, its gradient comes from Halide's propagate_adjoints: for each
//     input an op "<name>_grad<i>" (registered on first use) computes dy * dy/dx_i from the same
//     values, pointwise again, so the backward fuses too; and those ops are differentiated the same
//     way (gradients of any order).
// The definition must be a pure function of its input values (no element index, no state).
//
// An op over whole tensors gives `define` instead: its output's Func from its inputs' Funcs
// (dsl/halide_def.h's HalideTensor: a Func indexed innermost dim first, its shape outermost first),
// so it may read neighbours, reduce over an RDom, or index as it likes, and a shape rule:
//
//   const OpDef& blur = register_halide_op({
//       .name = "myns::blur_rows",
//       .define = [](const std::vector<HalideTensor>& in, const Attrs&) {
//         Halide::Var x, y;
//         Halide::Func f;
//         f(x, y) = (in[0].func(x - 1, y) + in[0].func(x, y) + in[0].func(x + 1, y)) / 3.0f;
//         return std::vector<HalideTensor>{{f, in[0].shape, in[0].dtype}}; },
//       .shape = [](const std::vector<TensorMeta>& in, const Attrs&) { return std::vector<TensorMeta>{in[0]}; }});
//
//   - A read past an input's edge gets its nearest element (Halide's repeat_edge), so stencils
//     need no bounds of their own.
//   - Eagerly and inside compile() it is a stage of a pipeline: its output is stored (a root of
//     the region, which its pointwise neighbours fuse into), the Funcs of its definition with
//     update definitions (reductions) are computed whole before it, in parallel where their
//     updates write distinct elements; the rest is inlined.
//   - Without a derivative rule, its gradient for input i is an op "<name>_grad<i>" over whole
//     tensors again, defined by Halide's propagate_adjoints of the definition (reads Halide
//     cannot invert, such as the clamped edges, become scatters computed serially on the CPU and
//     with atomic adds on CUDA).
// It has one output; its dtype is the shape rule's (the definition's value is converted to it).
#pragma once
#include <string>

#include "dsl/custom_op.h"

namespace kiln {

struct HalideOp {
  std::string name{};   // "namespace::op"
  int num_inputs = 1;
  PointwiseDef pointwise{};
  HalideDef define{};  // instead of pointwise: the output's Func from the inputs' Funcs
  // Required with `define`. Unset with `pointwise`: add()'s rule: the inputs broadcast, their result type (a 0-d input only raises the
  // category, as in PyTorch), on the inputs' one device.
  ShapeRule shape{};
  // Unset: from propagate_adjoints. Written with Tensor ops, as CustomOp::backward.
  DerivativeRule backward{};
  bool differentiable = true;
};

// Registers the op (kiln::Error as register_op: a name taken or malformed, no definition).
const OpDef& register_halide_op(HalideOp op);

}  // namespace kiln
