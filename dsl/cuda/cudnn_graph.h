// A cuDNN operation graph built through the backend API: tensors, pointwise, reduction, matmul
// and reshape operations, then heuristics, an execution plan and its workspace. Each tensor is
// named by a unique id; inputs and outputs get device pointers at execute(), scalars passed by
// value are held by the graph. Errors name the step and carry cuDNN's own message.
//
//   CudnnGraph g("attention forward");
//   int64_t q = g.tensor({b, h, s, d}, q_strides, cudnn::kDataBFloat16);
//   int64_t s = g.matmul(q, kt, g.virtual_tensor({b, h, s, s}));
//   ...
//   g.finalize(cudnn_handle());            // kiln::Error when no engine supports the graph
//   g.execute({{q, q_ptr}, ...}, workspace);   // at least g.workspace_bytes() of device memory
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "dsl/cuda/cudnn_api.h"

namespace kiln {

class CudnnGraph {
 public:
  using Dims = std::vector<int64_t>;

  explicit CudnnGraph(std::string name) : name_(std::move(name)) {}
  ~CudnnGraph();
  CudnnGraph(const CudnnGraph&) = delete;
  CudnnGraph& operator=(const CudnnGraph&) = delete;

  // A tensor in device memory (an input or output of the graph), 16-byte aligned.
  int64_t tensor(const Dims& dims, const Dims& strides, cudnn::DataType type);
  // An intermediate that never reaches memory (f32 unless told).
  int64_t virtual_tensor(const Dims& dims, const Dims& strides, cudnn::DataType type = cudnn::kDataFloat);
  // A scalar passed by value (f32), broadcast against the other operand, which has `rank` dims
  // (cuDNN wants operands of one rank).
  int64_t scalar(float value, size_t rank = 4);

  // y = mode(x[, b[, t]]); y is made virtual with x's dims and strides unless given. `math` is the
  // precision the operation computes in; `axis` is GEN_INDEX's.
  int64_t pointwise(cudnn::PointwiseMode mode, int64_t x, int64_t b = -1, int64_t t = -1, int64_t y = -1,
                    cudnn::DataType math = cudnn::kDataFloat, int64_t axis = -1);
  int64_t reduction(cudnn::ReductionOperator op, int64_t x, int64_t y);
  int64_t matmul(int64_t a, int64_t b, int64_t c);
  int64_t reshape(int64_t x, int64_t y);

  // Builds the operation graph, asks the heuristics for engine configurations and keeps the first
  // one that makes an execution plan.
  void finalize(cudnnHandle_t handle);
  size_t workspace_bytes() const { return workspace_; }
  // The chosen engine's description, for logs ("engine 3 of 5").
  const std::string& engine() const { return engine_; }
  // Runs the plan on the handle's stream. `pointers` gives every non-virtual, non-scalar tensor.
  void execute(cudnnHandle_t handle, const std::map<int64_t, void*>& pointers, void* workspace) const;

 private:
  struct TensorInfo {
    Dims dims, strides;
    cudnnBackendDescriptor_t desc = nullptr;
    bool is_virtual = false, by_value = false;
    float value = 0;
  };
  cudnnBackendDescriptor_t make(int type, const char* what);
  int64_t add_tensor(const Dims& dims, const Dims& strides, cudnn::DataType type, bool is_virtual, bool by_value,
                     float value);
  void set(cudnnBackendDescriptor_t d, int attr, int type, int64_t count, const void* values, const char* what);
  void finish(cudnnBackendDescriptor_t d, const char* what);

  std::string name_;
  std::map<int64_t, TensorInfo> tensors_;
  std::vector<cudnnBackendDescriptor_t> ops_;
  std::vector<cudnnBackendDescriptor_t> owned_;  // every descriptor, destroyed with the graph
  cudnnBackendDescriptor_t plan_ = nullptr;
  size_t workspace_ = 0;
  std::string engine_;
  int64_t next_uid_ = 1;
};

}  // namespace kiln
