// cuDNN's backend (graph) API, loaded at run time with dlopen like the driver and cuBLAS: kiln
// builds and runs without cuDNN, and asks for it only where a CUDA op uses it (fused attention).
// Types are written as plain integers and pointers so that no cuDNN header is needed to build
// kiln; tests/dsl/test_cudnn_api.cpp checks the values against the toolkit's headers where they
// are installed. dsl/cuda/cudnn_graph.h builds operation graphs on top of this.
//
//   if (cudnn_available()) { cudnnHandle_t h = cudnn_handle(); ... }
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace kiln {

using cudnnHandle_t = struct cudnnContext*;
using cudnnStatus_t = int;
using cudnnBackendDescriptor_t = void*;

// The backend enum values kiln uses (cudnn_graph.h, cuDNN 9).
namespace cudnn {
enum DescriptorType : int {
  kPointwiseDescriptor = 0,
  kEngineCfgDescriptor = 3,
  kEngineHeurDescriptor = 4,
  kExecutionPlanDescriptor = 5,
  kOperationPointwiseDescriptor = 13,
  kOperationGraphDescriptor = 15,
  kVariantPackDescriptor = 16,
  kTensorDescriptor = 17,
  kMatmulDescriptor = 18,
  kOperationMatmulDescriptor = 19,
  kReductionDescriptor = 21,
  kOperationReductionDescriptor = 22,
  kOperationReshapeDescriptor = 31,
};
enum AttributeName : int {
  kPointwiseMode = 0,
  kPointwiseMathPrec = 1,
  kPointwiseAxis = 9,
  kEngineHeurMode = 200,
  kEngineHeurOperationGraph = 201,
  kEngineHeurResults = 202,
  kExecutionPlanHandle = 400,
  kExecutionPlanEngineConfig = 401,
  kExecutionPlanWorkspaceSize = 402,
  kOperationPointwisePwDescriptor = 750,
  kOperationPointwiseXDesc = 751,
  kOperationPointwiseBDesc = 752,
  kOperationPointwiseYDesc = 753,
  kOperationPointwiseTDesc = 758,
  kOperationGraphHandle = 800,
  kOperationGraphOps = 801,
  kTensorByteAlignment = 900,
  kTensorDataType = 901,
  kTensorDimensions = 902,
  kTensorStrides = 903,
  kTensorUniqueId = 906,
  kTensorIsVirtual = 907,
  kTensorIsByValue = 908,
  kVariantPackUniqueIds = 1000,
  kVariantPackDataPointers = 1001,
  kVariantPackWorkspace = 1003,
  kMatmulCompType = 1500,
  kOperationMatmulADesc = 1520,
  kOperationMatmulBDesc = 1521,
  kOperationMatmulCDesc = 1522,
  kOperationMatmulDesc = 1523,
  kReductionOperator = 1600,
  kReductionCompType = 1601,
  kOperationReductionXDesc = 1610,
  kOperationReductionYDesc = 1611,
  kOperationReductionDesc = 1612,
  kOperationReshapeXDesc = 2200,
  kOperationReshapeYDesc = 2201,
};
enum AttributeType : int {
  kTypeHandle = 0,
  kTypeDataType = 1,
  kTypeBoolean = 2,
  kTypeInt64 = 3,
  kTypeFloat = 4,
  kTypeVoidPtr = 6,
  kTypeHeurMode = 8,
  kTypePointwiseMode = 14,
  kTypeBackendDescriptor = 15,
  kTypeReductionOperatorType = 18,
};
enum DataType : int {
  kDataFloat = 0,
  kDataHalf = 2,
  kDataInt32 = 4,
  kDataBFloat16 = 9,
  kDataBoolean = 11,
};
enum PointwiseMode : int {
  kAdd = 0,
  kMul = 1,
  kDiv = 6,
  kSub = 9,
  kExp = 13,
  kLog = 15,
  kIdentity = 21,
  kCmpGe = 303,
  kGenIndex = 501,
  kBinarySelect = 601,
};
enum ReductionOperator : int { kReduceAdd = 0, kReduceMax = 3 };
enum HeurMode : int { kHeurModeA = 3 };
inline constexpr cudnnStatus_t kStatusSuccess = 0;
}  // namespace cudnn

struct CudnnApi {
  size_t (*cudnnGetVersion)();
  cudnnStatus_t (*cudnnCreate)(cudnnHandle_t*);
  cudnnStatus_t (*cudnnSetStream)(cudnnHandle_t, void*);
  const char* (*cudnnGetErrorString)(cudnnStatus_t);
  void (*cudnnGetLastErrorString)(char*, size_t);
  cudnnStatus_t (*cudnnBackendCreateDescriptor)(int, cudnnBackendDescriptor_t*);
  cudnnStatus_t (*cudnnBackendDestroyDescriptor)(cudnnBackendDescriptor_t);
  cudnnStatus_t (*cudnnBackendFinalize)(cudnnBackendDescriptor_t);
  cudnnStatus_t (*cudnnBackendSetAttribute)(cudnnBackendDescriptor_t, int, int, int64_t, const void*);
  cudnnStatus_t (*cudnnBackendGetAttribute)(cudnnBackendDescriptor_t, int, int, int64_t, int64_t*, void*);
  cudnnStatus_t (*cudnnBackendExecute)(cudnnHandle_t, cudnnBackendDescriptor_t, cudnnBackendDescriptor_t);
};

// True when a CUDA device is usable and libcudnn.so.9 loads with the backend API. Never throws.
bool cudnn_available();
// Why cuDNN is unavailable ("" when it is available).
std::string cudnn_unavailable_reason();
// The loaded API; kiln::Error naming the reason when cuDNN is unavailable.
const CudnnApi& cudnn_api();
// The handle of device `index`, created on first use and bound to kiln's stream (cuda_context.h).
cudnnHandle_t cudnn_handle(int index = 0);
// The version of the loaded library, as cudnnGetVersion reports it (91400 for 9.14.0).
size_t cudnn_version();

// Throws kiln::Error "<what>: cuDNN error <name>: <the library's last message>" when rc is not
// CUDNN_STATUS_SUCCESS.
void check_cudnn(cudnnStatus_t rc, const std::string& what);

}  // namespace kiln
