// Regions of parameters only, computed once: a region whose every input is a captured tensor (a
// module's parameter or buffer) computes the same outputs on every call while those tensors are
// unchanged: the bf16 copies of the weights that autocast's matmuls read, a weight's transposed
// copy. The executor keeps such a region's outputs and reuses them while every input is the same
// tensor (storage, layout) at the same version; every kiln write (copy_, the optimizers,
// load_state_dict) bumps the version, so an updated parameter is read again on the next call, as
// packed weights are (weight_packing.h). A write through data_ptr() does not bump it and must not
// be used on the parameters of a compiled function.
//
// Not for training steps' graphs (their parameters change on every call; graph_keeps_outputs in
// graph/graph.h), graphs that write their inputs, outputs of the graph, and outputs computed in
// place. A CUDA graph captured from such a call reads the kept outputs without computing them;
// its replays check that every parameter it reads is unchanged, and capture it again otherwise
// (graph/cuda_graphs.h).
#pragma once
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "dsl/tensor.h"
#include "dsl/tensor_stamp.h"
#include "graph/graph.h"
#include "schedules/region.h"

namespace kiln {

// Whether region r of g keeps its outputs between calls (the rules above).
bool keeps_outputs(const Graph& g, const Region& r, const std::map<int, std::vector<int>>& in_place,
                   const std::map<int, int>& over);

class KeptOutputs {
 public:
  // The outputs stored from inputs that are still the same tensors at the same versions, or
  // nothing (empty).
  std::vector<Tensor> get(const std::vector<Tensor>& inputs) const;
  // Stores outputs computed from inputs stamped before they were computed.
  void put(std::vector<TensorStamp> sources, std::vector<Tensor> outputs);
  // The stamps of inputs now (taken before computing the outputs to put).
  static std::vector<TensorStamp> stamps(const std::vector<Tensor>& inputs);

 private:
  mutable std::mutex mu_;
  std::vector<TensorStamp> sources_;
  std::vector<Tensor> outputs_;
};

// Calls whose region outputs came from the kept copies, in this process (tests, benchmarks).
int64_t kept_outputs_reused();

}  // namespace kiln
