#include "dsl/cuda/cudnn_graph.h"

#include <algorithm>
#include <cstdio>

#include "dsl/cuda/cuda_api.h"
#include "dsl/cuda/cuda_context.h"
#include "dsl/error.h"

namespace kiln {

using namespace cudnn;

CudnnGraph::~CudnnGraph() {
  if (!cudnn_available()) return;
  const CudnnApi& api = cudnn_api();
  if (pack_) api.cudnnBackendDestroyDescriptor(pack_);
  for (auto it = owned_.rbegin(); it != owned_.rend(); ++it) api.cudnnBackendDestroyDescriptor(*it);
}

cudnnBackendDescriptor_t CudnnGraph::make(int type, const char* what) {
  cudnnBackendDescriptor_t d = nullptr;
  check_cudnn(cudnn_api().cudnnBackendCreateDescriptor(type, &d), name_ + ": creating " + what);
  owned_.push_back(d);
  return d;
}

void CudnnGraph::set(cudnnBackendDescriptor_t d, int attr, int type, int64_t count, const void* values,
                     const char* what) {
  check_cudnn(cudnn_api().cudnnBackendSetAttribute(d, attr, type, count, values),
              name_ + ": setting attribute " + std::to_string(attr) + " of " + what);
}

void CudnnGraph::finish(cudnnBackendDescriptor_t d, const char* what) {
  check_cudnn(cudnn_api().cudnnBackendFinalize(d), name_ + ": finalizing " + what);
}

int64_t CudnnGraph::add_tensor(const Dims& dims, const Dims& strides, DataType type, bool is_virtual, bool by_value,
                               float value) {
  KILN_CHECK(dims.size() == strides.size(), name_, ": internal: a tensor of ", dims.size(), " dims with ",
             strides.size(), " strides");
  int64_t uid = next_uid_++;
  TensorInfo t{dims, strides, make(kTensorDescriptor, "a tensor"), is_virtual, by_value, value};
  int64_t alignment = 16;
  set(t.desc, kTensorDataType, kTypeDataType, 1, &type, "a tensor");
  set(t.desc, kTensorDimensions, kTypeInt64, int64_t(dims.size()), dims.data(), "a tensor");
  set(t.desc, kTensorStrides, kTypeInt64, int64_t(strides.size()), strides.data(), "a tensor");
  set(t.desc, kTensorUniqueId, kTypeInt64, 1, &uid, "a tensor");
  set(t.desc, kTensorByteAlignment, kTypeInt64, 1, &alignment, "a tensor");
  set(t.desc, kTensorIsVirtual, kTypeBoolean, 1, &is_virtual, "a tensor");
  if (by_value) set(t.desc, kTensorIsByValue, kTypeBoolean, 1, &by_value, "a tensor");
  finish(t.desc, "a tensor");
  tensors_.emplace(uid, std::move(t));
  return uid;
}

int64_t CudnnGraph::tensor(const Dims& dims, const Dims& strides, DataType type) {
  return add_tensor(dims, strides, type, false, false, 0);
}

int64_t CudnnGraph::virtual_tensor(const Dims& dims, const Dims& strides, DataType type) {
  return add_tensor(dims, strides, type, true, false, 0);
}

int64_t CudnnGraph::scalar(float value, size_t rank) {
  return add_tensor(Dims(rank, 1), Dims(rank, 1), kDataFloat, false, true, value);
}

int64_t CudnnGraph::pointwise(PointwiseMode mode, int64_t x, int64_t b, int64_t t, int64_t y, DataType math,
                              int64_t axis) {
  if (y < 0) y = virtual_tensor(tensors_.at(x).dims, tensors_.at(x).strides);
  cudnnBackendDescriptor_t pw = make(kPointwiseDescriptor, "a pointwise descriptor");
  set(pw, kPointwiseMode, kTypePointwiseMode, 1, &mode, "a pointwise descriptor");
  set(pw, kPointwiseMathPrec, kTypeDataType, 1, &math, "a pointwise descriptor");
  if (axis >= 0) set(pw, kPointwiseAxis, kTypeInt64, 1, &axis, "a pointwise descriptor");
  finish(pw, "a pointwise descriptor");
  cudnnBackendDescriptor_t op = make(kOperationPointwiseDescriptor, "a pointwise operation");
  set(op, kOperationPointwisePwDescriptor, kTypeBackendDescriptor, 1, &pw, "a pointwise operation");
  set(op, kOperationPointwiseXDesc, kTypeBackendDescriptor, 1, &tensors_.at(x).desc, "a pointwise operation");
  if (b >= 0) set(op, kOperationPointwiseBDesc, kTypeBackendDescriptor, 1, &tensors_.at(b).desc, "a pointwise operation");
  if (t >= 0) set(op, kOperationPointwiseTDesc, kTypeBackendDescriptor, 1, &tensors_.at(t).desc, "a pointwise operation");
  set(op, kOperationPointwiseYDesc, kTypeBackendDescriptor, 1, &tensors_.at(y).desc, "a pointwise operation");
  finish(op, "a pointwise operation");
  ops_.push_back(op);
  return y;
}

int64_t CudnnGraph::reduction(ReductionOperator reduce, int64_t x, int64_t y) {
  DataType math = kDataFloat;
  cudnnBackendDescriptor_t r = make(kReductionDescriptor, "a reduction descriptor");
  set(r, kReductionOperator, kTypeReductionOperatorType, 1, &reduce, "a reduction descriptor");
  set(r, kReductionCompType, kTypeDataType, 1, &math, "a reduction descriptor");
  finish(r, "a reduction descriptor");
  cudnnBackendDescriptor_t op = make(kOperationReductionDescriptor, "a reduction operation");
  set(op, kOperationReductionDesc, kTypeBackendDescriptor, 1, &r, "a reduction operation");
  set(op, kOperationReductionXDesc, kTypeBackendDescriptor, 1, &tensors_.at(x).desc, "a reduction operation");
  set(op, kOperationReductionYDesc, kTypeBackendDescriptor, 1, &tensors_.at(y).desc, "a reduction operation");
  finish(op, "a reduction operation");
  ops_.push_back(op);
  return y;
}

int64_t CudnnGraph::matmul(int64_t a, int64_t b, int64_t c) {
  DataType math = kDataFloat;
  cudnnBackendDescriptor_t m = make(kMatmulDescriptor, "a matmul descriptor");
  set(m, kMatmulCompType, kTypeDataType, 1, &math, "a matmul descriptor");
  finish(m, "a matmul descriptor");
  cudnnBackendDescriptor_t op = make(kOperationMatmulDescriptor, "a matmul operation");
  set(op, kOperationMatmulADesc, kTypeBackendDescriptor, 1, &tensors_.at(a).desc, "a matmul operation");
  set(op, kOperationMatmulBDesc, kTypeBackendDescriptor, 1, &tensors_.at(b).desc, "a matmul operation");
  set(op, kOperationMatmulCDesc, kTypeBackendDescriptor, 1, &tensors_.at(c).desc, "a matmul operation");
  set(op, kOperationMatmulDesc, kTypeBackendDescriptor, 1, &m, "a matmul operation");
  finish(op, "a matmul operation");
  ops_.push_back(op);
  return c;
}

int64_t CudnnGraph::reshape(int64_t x, int64_t y) {
  cudnnBackendDescriptor_t op = make(kOperationReshapeDescriptor, "a reshape operation");
  set(op, kOperationReshapeXDesc, kTypeBackendDescriptor, 1, &tensors_.at(x).desc, "a reshape operation");
  set(op, kOperationReshapeYDesc, kTypeBackendDescriptor, 1, &tensors_.at(y).desc, "a reshape operation");
  finish(op, "a reshape operation");
  ops_.push_back(op);
  return y;
}

void CudnnGraph::finalize(cudnnHandle_t handle) {
  const CudnnApi& api = cudnn_api();
  cudnnBackendDescriptor_t graph = make(kOperationGraphDescriptor, "the operation graph");
  set(graph, kOperationGraphHandle, kTypeHandle, 1, &handle, "the operation graph");
  set(graph, kOperationGraphOps, kTypeBackendDescriptor, int64_t(ops_.size()), ops_.data(), "the operation graph");
  finish(graph, "the operation graph");

  cudnnBackendDescriptor_t heur = make(kEngineHeurDescriptor, "the engine heuristics");
  set(heur, kEngineHeurOperationGraph, kTypeBackendDescriptor, 1, &graph, "the engine heuristics");
  HeurMode mode = kHeurModeA;
  set(heur, kEngineHeurMode, kTypeHeurMode, 1, &mode, "the engine heuristics");
  finish(heur, "the engine heuristics");
  int64_t count = 0;
  check_cudnn(api.cudnnBackendGetAttribute(heur, kEngineHeurResults, kTypeBackendDescriptor, 0, &count, nullptr),
              name_ + ": counting the heuristics' engine configurations");
  KILN_CHECK(count > 0, name_, ": cuDNN ", cudnn_version(), " has no engine for this graph");
  std::vector<cudnnBackendDescriptor_t> configs;
  for (int64_t i = 0; i < count; ++i) configs.push_back(make(kEngineCfgDescriptor, "an engine configuration"));
  int64_t got = 0;
  check_cudnn(api.cudnnBackendGetAttribute(heur, kEngineHeurResults, kTypeBackendDescriptor, count, &got,
                                           configs.data()),
              name_ + ": reading the heuristics' engine configurations");
  configurations_ = int(got);
  std::string failures;
  for (int64_t i = 0; i < got && plans_.size() < size_t(kMaxPlans); ++i) {
    cudnnBackendDescriptor_t plan = nullptr;
    check_cudnn(api.cudnnBackendCreateDescriptor(kExecutionPlanDescriptor, &plan), name_ + ": creating a plan");
    owned_.push_back(plan);
    cudnnStatus_t rc = api.cudnnBackendSetAttribute(plan, kExecutionPlanHandle, kTypeHandle, 1, &handle);
    if (rc == kStatusSuccess)
      rc = api.cudnnBackendSetAttribute(plan, kExecutionPlanEngineConfig, kTypeBackendDescriptor, 1, &configs[size_t(i)]);
    if (rc == kStatusSuccess) rc = api.cudnnBackendFinalize(plan);
    if (rc != kStatusSuccess) {
      try {
        check_cudnn(rc, "configuration " + std::to_string(i + 1));
      } catch (const Error& e) {
        failures += std::string("\n  ") + e.what();
      }
      continue;
    }
    int64_t bytes = 0, n = 0;
    check_cudnn(api.cudnnBackendGetAttribute(plan, kExecutionPlanWorkspaceSize, kTypeInt64, 1, &n, &bytes),
                name_ + ": reading the plan's workspace size");
    plans_.push_back({plan, size_t(bytes), int(i), -1});
  }
  KILN_CHECK(!plans_.empty(), name_, ": none of the ", got, " engine configurations cuDNN ", cudnn_version(),
             " proposed makes a plan:", failures);
  tuned_ = plans_.size() == 1;
}

size_t CudnnGraph::workspace_bytes() const {
  KILN_CHECK(!plans_.empty(), name_, ": internal: no plan before finalize()");
  if (tuned_) return plans_[chosen_].workspace;
  size_t most = 0;
  for (const Plan& p : plans_) most = std::max(most, p.workspace);
  return most;
}

std::string CudnnGraph::engine() const {
  if (plans_.empty()) return "no plan";
  const Plan& p = plans_[chosen_];
  std::string s = "engine configuration " + std::to_string(p.index + 1) + " of " + std::to_string(configurations_);
  if (p.ms >= 0) {
    char buf[64];
    std::snprintf(buf, sizeof buf, ", %.3f ms; %zu timed", p.ms, plans_.size());
    s += buf;
  }
  return s;
}

void CudnnGraph::pick_fastest(cudnnHandle_t handle, int index, const std::map<int64_t, void*>& pointers,
                              void* workspace) {
  std::vector<double> ms =
      time_candidates(index, plans_.size(), [&](size_t i) { run(handle, plans_[i], pointers, workspace); });
  for (size_t i = 0; i < plans_.size(); ++i) plans_[i].ms = ms[i];
  chosen_ = size_t(std::min_element(ms.begin(), ms.end()) - ms.begin());
  tuned_ = true;
}

void CudnnGraph::execute(cudnnHandle_t handle, const std::map<int64_t, void*>& pointers, void* workspace) {
  KILN_CHECK(!plans_.empty(), name_, ": internal: executed before finalize()");
  run(handle, plans_[chosen_], pointers, workspace);
}

void CudnnGraph::run(cudnnHandle_t handle, const Plan& plan, const std::map<int64_t, void*>& pointers,
                     void* workspace) {
  const CudnnApi& api = cudnn_api();
  std::vector<int64_t> uids;
  std::vector<void*> ptrs;
  for (const auto& [uid, t] : tensors_) {
    if (t.is_virtual) continue;
    uids.push_back(uid);
    if (t.by_value) {
      ptrs.push_back(const_cast<float*>(&t.value));
    } else {
      auto it = pointers.find(uid);
      KILN_CHECK(it != pointers.end(), name_, ": internal: no pointer for tensor ", uid);
      ptrs.push_back(it->second);
    }
  }
  ptrs.push_back(workspace);
  if (!pack_ || ptrs != pack_pointers_) {
    if (pack_) api.cudnnBackendDestroyDescriptor(pack_);
    pack_ = nullptr;
    cudnnBackendDescriptor_t pack = nullptr;
    check_cudnn(api.cudnnBackendCreateDescriptor(kVariantPackDescriptor, &pack), name_ + ": creating the variant pack");
    pack_ = pack;
    check_cudnn(api.cudnnBackendSetAttribute(pack, kVariantPackUniqueIds, kTypeInt64, int64_t(uids.size()), uids.data()),
                name_ + ": the variant pack's ids");
    check_cudnn(api.cudnnBackendSetAttribute(pack, kVariantPackDataPointers, kTypeVoidPtr, int64_t(uids.size()),
                                             ptrs.data()),
                name_ + ": the variant pack's pointers");
    check_cudnn(api.cudnnBackendSetAttribute(pack, kVariantPackWorkspace, kTypeVoidPtr, 1, &workspace),
                name_ + ": the variant pack's workspace");
    check_cudnn(api.cudnnBackendFinalize(pack), name_ + ": finalizing the variant pack");
    pack_pointers_ = std::move(ptrs);
  }
  check_cudnn(api.cudnnBackendExecute(handle, plan.desc, pack_), name_ + ": executing");
}

}  // namespace kiln
