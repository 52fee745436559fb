// Custom operators: an op a user registers by name, with its shape and dtype rule, its kernels
// (C++ over tensors, for the CPU and for CUDA) and its derivative rule written with Tensor ops.
// A registered op is an OpDef like kiln's own: it runs eagerly through dispatch(), records its
// backward node on the tape, and is traced by compile() as one graph node that runs as a step
// between the compiled pipelines (never a graph break); in a compiled training step its
// derivative rule is traced into the backward graph. Like torch.library.custom_op:
//
//   const OpDef& op = register_op({
//       .name = "myns::scaled_tanh",
//       .shape = [](const std::vector<TensorMeta>& in, const Attrs&) { return std::vector<TensorMeta>{in[0]}; },
//       .cpu = [](const TensorList& in, const Attrs& a) { ... return TensorList{out}; },
//       .backward = [](const TensorList& in, const TensorList& out, const TensorList& grads,
//                      const Attrs& a, const std::vector<bool>& needed) { ... return TensorList{dx}; }});
//   Tensor y = call_op(op, {x}, {{"scale", 2.0}})[0];
//
// A custom op is a pure function of its inputs and attributes: it writes only its own outputs
// (new tensors, never an input or a view of one) and draws no random numbers. Its kernels get
// contiguous inputs on one device. tests/graph/test_check_op.cpp and graph/check_op.h check a
// registration against its kernels (check_op).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "dsl/attrs.h"
#include "dsl/op_def.h"
#include "dsl/tensor.h"

namespace kiln {

// grads of the outputs -> grads of the inputs (an undefined Tensor where none flows). `needed[i]`
// says whether input i wants a gradient: a rule may skip the others (PyTorch's
// needs_input_grad). The rules of kiln's own ops (autograd/derivatives.h) have this form too.
using DerivativeRule = std::function<TensorList(const TensorList& inputs, const TensorList& outputs,
                                                const TensorList& grad_outputs, const Attrs&,
                                                const std::vector<bool>& needed)>;

// A kernel of a custom op: the op's outputs from its inputs (contiguous, on the kernel's device).
using CustomKernel = std::function<TensorList(const TensorList& inputs, const Attrs&)>;

// A tensor's memory as a kernel over raw buffers sees it: element (i0, i1, ...) is at
// data + (i0 * strides[0] + i1 * strides[1] + ...) elements of `dtype` (a device pointer on CUDA).
struct StridedBuffer {
  void* data = nullptr;
  DType dtype = DType::f32;
  Shape shape;
  Strides strides;  // in elements; 0 where a dim is broadcast
  Device device;
};
// A kernel over raw buffers, in destination-passing style: it reads its inputs in the caller's
// layout (a transposed or broadcast view arrives as it is, without a copy) and writes every
// element of the outputs, which kiln allocates (contiguous) from the shape rule. For kernels
// written without kiln's Tensor API (C, a vendor library, an existing C++ code base).
using RawKernel = std::function<void(const std::vector<StridedBuffer>& inputs,
                                     const std::vector<StridedBuffer>& outputs, const Attrs&)>;

struct CustomOp {
  std::string name{};    // "namespace::op": letters, digits and '_', one "::"
  int num_inputs = 1;    // at least 1 (the inputs' device picks the kernel)
  ShapeRule shape{};     // the outputs' shapes, dtypes and devices; throws kiln::Error on bad input
  CustomKernel cpu{};    // at least one kernel: cpu or raw_cpu, cuda or raw_cuda
  CustomKernel cuda{};
  RawKernel raw_cpu{};   // instead of cpu (not both)
  RawKernel raw_cuda{};  // instead of cuda (not both)
  DerivativeRule backward{};   // written with Tensor ops (other custom ops included)
  bool differentiable = true;  // false: no gradient flows through it (an index, a mask)
  // Talks to other processes (kiln's own distributed ops): see OpDef::collective.
  bool collective = false;
  // An op with a Halide definition of one element (graph/halide_op.h's register_halide_op): the
  // output element from its inputs' elements, broadcast. Compiled regions lower and fuse it like
  // kiln's own pointwise ops; its kernels run it eagerly.
  PointwiseDef pointwise{};
  // An op with a Halide definition over whole tensors (register_halide_op's `define`): its one
  // output's Func from its inputs' Funcs (stencils, reductions, any index arithmetic). Compiled
  // regions lower it as a stage of their pipeline (schedule class custom); its kernels run it
  // eagerly. Not with `pointwise`.
  HalideDef define{};

  bool has_cpu_kernel() const { return cpu || raw_cpu; }
  bool has_cuda_kernel() const { return cuda || raw_cuda; }
};

// Registers the op and returns its OpDef, which lives as long as the process. kiln::Error for a
// name already taken (by kiln or by another registration), a malformed name, a missing shape rule
// or no kernel. Without `backward`, a differentiable op records a tape node whose backward
// raises kiln::Error naming the op (as PyTorch's custom ops without register_autograd do).
const OpDef& register_op(CustomOp op);

// kiln's stream on CUDA device `device`, as a CUstream (a cudaStream_t to the CUDA runtime, in
// the device's primary context): a custom op's CUDA kernel launches on it, so that it runs in order
// with kiln's own kernels and copies. Kernels compiled with nvcc by the user's CMake:
// cmake/kiln_cuda_kernels.cmake's kiln_add_cuda_kernels(). kiln::Error without CUDA.
void* cuda_stream(int device = 0);

// Calls a registered op (kiln's own or a custom one) through dispatch().
TensorList call_op(const OpDef& op, const TensorList& inputs, const Attrs& attrs = {});
TensorList call_op(std::string_view name, const TensorList& inputs, const Attrs& attrs = {});

}  // namespace kiln
