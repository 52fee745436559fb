// Packed matmul weights: a compiled graph's matmul whose right operand b is a strided view of a
// captured tensor (a Linear's weight read as weight.t()) reads a packed copy of that view, made
// once and reused while the tensor's storage and version are unchanged. Every kiln write (copy_,
// the optimizers, load_state_dict) bumps the version, so an update repacks on the next call; a
// write through data_ptr() does not, and must not be used on weights of a compiled function.
//
// Two layouts: `dense` (b contiguous, for the eager GEMM) and `panels` (f32 [ceil(N/32), K, 32]:
// each 32-column panel of b contiguous, zero past N), which the GEMM inside a pipeline streams
// with no per-call packing (lower_region.h, cpu_schedule.h).
#pragma once
#include <memory>
#include <mutex>

#include "dsl/tensor.h"
#include "dsl/tensor_stamp.h"
#include "graph/graph.h"

namespace kiln {

constexpr int kGemmPanel = 32;  // columns per packed panel

// The panels' shape for a K x N weight: [ceil(N/32), K, 32].
inline Shape panel_shape(const Shape& kn) { return {(kn[1] + kGemmPanel - 1) / kGemmPanel, kn[0], kGemmPanel}; }

// Whether node n is a matmul whose b is a non-contiguous 2-D view chain of a captured graph input
// (never in a training step's graphs: their weights change on every call).
bool packs_weight(const Graph& g, const GraphNode& n);

class PackedWeight {
 public:
  enum class Layout { dense, panels };
  explicit PackedWeight(Layout layout) : layout_(layout) {}

  // b (K x N) in this layout: the packed copy while b's storage, version and layout are the ones
  // it was made from, else a fresh one.
  Tensor get(const Tensor& b) const;

 private:
  Layout layout_;
  mutable std::mutex mu_;
  mutable TensorStamp source_;  // the b that packed_ was made from
  mutable Tensor packed_;
};

}  // namespace kiln
