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
//   g.execute(handle, {{q, q_ptr}, ...}, workspace);   // at least g.workspace_bytes() of memory
// A graph is used by one thread at a time (the attention cache holds a lock around each use).
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

  // Builds the operation graph, asks the heuristics for engine configurations and keeps the plans
  // of the first kMaxPlans that build (kiln::Error naming cuDNN's reasons when none does).
  void finalize(cudnnHandle_t handle);
  // Device memory execute() needs: the most any kept plan needs until pick_fastest() chose one.
  size_t workspace_bytes() const;
  // The chosen plan, for logs ("engine configuration 2 of 7, 0.061 ms; 3 timed").
  std::string engine() const;
  bool tuned() const { return tuned_; }
  // Times each kept plan on these operands on device `index`'s stream (time_candidates,
  // cuda_context.h) and keeps the fastest, as cuDNN's frontend autotuning does. The outputs hold
  // the last plan's results afterwards.
  void pick_fastest(cudnnHandle_t handle, int index, const std::map<int64_t, void*>& pointers, void* workspace);
  // Runs the chosen plan on the handle's stream. `pointers` gives every non-virtual, non-scalar
  // tensor. The variant pack is rebuilt only when the pointers differ from the last call's (in
  // steady state the caching allocator hands out the same blocks).
  void execute(cudnnHandle_t handle, const std::map<int64_t, void*>& pointers, void* workspace);

  static constexpr int kMaxPlans = 8;

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

  struct Plan {
    cudnnBackendDescriptor_t desc = nullptr;
    size_t workspace = 0;
    int index = 0;     // among the heuristics' configurations
    double ms = -1;    // when timed
  };
  void run(cudnnHandle_t handle, const Plan& plan, const std::map<int64_t, void*>& pointers, void* workspace);

  std::string name_;
  std::map<int64_t, TensorInfo> tensors_;
  std::vector<cudnnBackendDescriptor_t> ops_;
  std::vector<cudnnBackendDescriptor_t> owned_;  // every descriptor, destroyed with the graph
  std::vector<Plan> plans_;
  size_t chosen_ = 0;
  int configurations_ = 0;
  bool tuned_ = false;
  // The variant pack of the last call and the pointers and workspace it was built for.
  cudnnBackendDescriptor_t pack_ = nullptr;
  std::vector<void*> pack_pointers_;
  int64_t next_uid_ = 1;
};

}  // namespace kiln
