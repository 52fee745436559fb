// Packed matmul weights: a compiled graph's matmul whose right operand is a strided view of a
// captured tensor (a Linear's weight read as weight.t()) runs on a dense copy of that view, made
// once and reused while the tensor's storage and version are unchanged. Every kiln write (copy_,
// the optimizers, load_state_dict) bumps the version, so an update repacks on the next call; a
// write through data_ptr() does not, and must not be used on weights of a compiled function.
// The GEMM then reads b dense instead of gathering a transposed panel on every call.
#pragma once
#include <memory>
#include <mutex>

#include "dsl/tensor.h"
#include "graph/graph.h"

namespace kiln {

// Whether node n is a matmul whose b is a non-contiguous view chain of a captured graph input.
bool packs_weight(const Graph& g, const GraphNode& n);

class PackedWeight {
 public:
  // b as a contiguous tensor: the packed copy while b's storage, version and layout are the ones
  // it was made from, else a fresh one.
  Tensor get(const Tensor& b) const;

 private:
  mutable std::mutex mu_;
  mutable std::weak_ptr<Storage> storage_;
  mutable uint64_t version_ = 0;
  mutable Shape shape_;
  mutable Strides strides_;
  mutable int64_t offset_ = 0;
  mutable Tensor packed_;
};

}  // namespace kiln
