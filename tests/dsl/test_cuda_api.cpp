// dsl/cuda/ on any machine: the CUDA constants kiln declares itself (it loads the driver and
// cuBLAS with dlopen, without their headers) against the toolkit's headers where the toolkit is
// installed, and the errors a user gets for a CUDA tensor where no device is usable.
#include <boost/test/unit_test.hpp>

#include <cstddef>

#include "dsl/cuda/cudnn_api.h"
#include "dsl/cuda/nccl_api.h"
#include "kiln.h"

#if KILN_HAVE_CUDA_HEADERS
#include <cublasLt.h>
#include <cublas_api.h>
#include <cuda.h>
#include <cudnn_graph.h>
#include <library_types.h>
#include <nccl.h>
#endif

using namespace kiln;

#if KILN_HAVE_CUDA_HEADERS
static_assert(sizeof(kiln::CUdeviceptr) == sizeof(::CUdeviceptr));
static_assert(kiln::kStreamCaptureModeRelaxed == CU_STREAM_CAPTURE_MODE_RELAXED);
static_assert(kiln::kCudaErrorNotReady == CUDA_ERROR_NOT_READY);
static_assert(kiln::kDeviceAttributeComputeCapabilityMajor == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR &&
              kiln::kDeviceAttributeComputeCapabilityMinor == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
static_assert(kCublasOpN == CUBLAS_OP_N && kCublasOpT == CUBLAS_OP_T);
static_assert(kCudaR32F == CUDA_R_32F && kCudaR16F == CUDA_R_16F && kCudaR16BF == CUDA_R_16BF &&
              kCudaR64F == CUDA_R_64F);
static_assert(kCublasCompute32F == CUBLAS_COMPUTE_32F && kCublasCompute32FFastTf32 == CUBLAS_COMPUTE_32F_FAST_TF32 &&
              kCublasCompute64F == CUBLAS_COMPUTE_64F && kCublasGemmDefault == CUBLAS_GEMM_DEFAULT);
static_assert(kCublasLtDescTransA == CUBLASLT_MATMUL_DESC_TRANSA && kCublasLtDescTransB == CUBLASLT_MATMUL_DESC_TRANSB &&
              kCublasLtDescEpilogue == CUBLASLT_MATMUL_DESC_EPILOGUE &&
              kCublasLtDescBiasPointer == CUBLASLT_MATMUL_DESC_BIAS_POINTER &&
              kCublasLtDescEpilogueAuxPointer == CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER &&
              kCublasLtDescEpilogueAuxLd == CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD &&
              kCublasLtEpilogueBias == CUBLASLT_EPILOGUE_BIAS &&
              kCublasLtEpilogueGeluBias == CUBLASLT_EPILOGUE_GELU_BIAS &&
              kCublasLtEpilogueGeluAuxBias == CUBLASLT_EPILOGUE_GELU_AUX_BIAS &&
              kCublasLtEpilogueDGelu == CUBLASLT_EPILOGUE_DGELU &&
              kCublasLtEpilogueBgradb == CUBLASLT_EPILOGUE_BGRADB &&
              kCublasLtPrefMaxWorkspaceBytes == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES);
static_assert(sizeof(kiln::CublasLtHeuristic) == sizeof(cublasLtMatmulHeuristicResult_t) &&
              offsetof(kiln::CublasLtHeuristic, workspace_size) == offsetof(cublasLtMatmulHeuristicResult_t, workspaceSize) &&
              offsetof(kiln::CublasLtHeuristic, state) == offsetof(cublasLtMatmulHeuristicResult_t, state));
// cuDNN's backend API (dsl/cuda/cudnn_api.h).
static_assert(cudnn::kPointwiseDescriptor == CUDNN_BACKEND_POINTWISE_DESCRIPTOR &&
              cudnn::kEngineCfgDescriptor == CUDNN_BACKEND_ENGINECFG_DESCRIPTOR &&
              cudnn::kEngineHeurDescriptor == CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR &&
              cudnn::kExecutionPlanDescriptor == CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR &&
              cudnn::kOperationPointwiseDescriptor == CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR &&
              cudnn::kOperationGraphDescriptor == CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR &&
              cudnn::kVariantPackDescriptor == CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR &&
              cudnn::kTensorDescriptor == CUDNN_BACKEND_TENSOR_DESCRIPTOR &&
              cudnn::kMatmulDescriptor == CUDNN_BACKEND_MATMUL_DESCRIPTOR &&
              cudnn::kOperationMatmulDescriptor == CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR &&
              cudnn::kReductionDescriptor == CUDNN_BACKEND_REDUCTION_DESCRIPTOR &&
              cudnn::kOperationReductionDescriptor == CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR &&
              cudnn::kOperationReshapeDescriptor == CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
static_assert(cudnn::kPointwiseMode == CUDNN_ATTR_POINTWISE_MODE && cudnn::kPointwiseMathPrec == CUDNN_ATTR_POINTWISE_MATH_PREC &&
              cudnn::kPointwiseAxis == CUDNN_ATTR_POINTWISE_AXIS && cudnn::kEngineHeurMode == CUDNN_ATTR_ENGINEHEUR_MODE &&
              cudnn::kEngineHeurOperationGraph == CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH &&
              cudnn::kEngineHeurResults == CUDNN_ATTR_ENGINEHEUR_RESULTS &&
              cudnn::kExecutionPlanHandle == CUDNN_ATTR_EXECUTION_PLAN_HANDLE &&
              cudnn::kExecutionPlanEngineConfig == CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG &&
              cudnn::kExecutionPlanWorkspaceSize == CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE &&
              cudnn::kOperationPointwisePwDescriptor == CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR &&
              cudnn::kOperationPointwiseXDesc == CUDNN_ATTR_OPERATION_POINTWISE_XDESC &&
              cudnn::kOperationPointwiseBDesc == CUDNN_ATTR_OPERATION_POINTWISE_BDESC &&
              cudnn::kOperationPointwiseYDesc == CUDNN_ATTR_OPERATION_POINTWISE_YDESC &&
              cudnn::kOperationPointwiseTDesc == CUDNN_ATTR_OPERATION_POINTWISE_TDESC &&
              cudnn::kOperationGraphHandle == CUDNN_ATTR_OPERATIONGRAPH_HANDLE &&
              cudnn::kOperationGraphOps == CUDNN_ATTR_OPERATIONGRAPH_OPS);
static_assert(cudnn::kTensorByteAlignment == CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT &&
              cudnn::kTensorDataType == CUDNN_ATTR_TENSOR_DATA_TYPE && cudnn::kTensorDimensions == CUDNN_ATTR_TENSOR_DIMENSIONS &&
              cudnn::kTensorStrides == CUDNN_ATTR_TENSOR_STRIDES && cudnn::kTensorUniqueId == CUDNN_ATTR_TENSOR_UNIQUE_ID &&
              cudnn::kTensorIsVirtual == CUDNN_ATTR_TENSOR_IS_VIRTUAL && cudnn::kTensorIsByValue == CUDNN_ATTR_TENSOR_IS_BY_VALUE &&
              cudnn::kVariantPackUniqueIds == CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS &&
              cudnn::kVariantPackDataPointers == CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS &&
              cudnn::kVariantPackWorkspace == CUDNN_ATTR_VARIANT_PACK_WORKSPACE &&
              cudnn::kMatmulCompType == CUDNN_ATTR_MATMUL_COMP_TYPE &&
              cudnn::kOperationMatmulADesc == CUDNN_ATTR_OPERATION_MATMUL_ADESC &&
              cudnn::kOperationMatmulBDesc == CUDNN_ATTR_OPERATION_MATMUL_BDESC &&
              cudnn::kOperationMatmulCDesc == CUDNN_ATTR_OPERATION_MATMUL_CDESC &&
              cudnn::kOperationMatmulDesc == CUDNN_ATTR_OPERATION_MATMUL_DESC &&
              cudnn::kReductionOperator == CUDNN_ATTR_REDUCTION_OPERATOR &&
              cudnn::kReductionCompType == CUDNN_ATTR_REDUCTION_COMP_TYPE &&
              cudnn::kOperationReductionXDesc == CUDNN_ATTR_OPERATION_REDUCTION_XDESC &&
              cudnn::kOperationReductionYDesc == CUDNN_ATTR_OPERATION_REDUCTION_YDESC &&
              cudnn::kOperationReductionDesc == CUDNN_ATTR_OPERATION_REDUCTION_DESC &&
              cudnn::kOperationReshapeXDesc == CUDNN_ATTR_OPERATION_RESHAPE_XDESC &&
              cudnn::kOperationReshapeYDesc == CUDNN_ATTR_OPERATION_RESHAPE_YDESC);
static_assert(cudnn::kTypeHandle == CUDNN_TYPE_HANDLE && cudnn::kTypeDataType == CUDNN_TYPE_DATA_TYPE &&
              cudnn::kTypeBoolean == CUDNN_TYPE_BOOLEAN && cudnn::kTypeInt64 == CUDNN_TYPE_INT64 &&
              cudnn::kTypeFloat == CUDNN_TYPE_FLOAT && cudnn::kTypeVoidPtr == CUDNN_TYPE_VOID_PTR &&
              cudnn::kTypeHeurMode == CUDNN_TYPE_HEUR_MODE && cudnn::kTypePointwiseMode == CUDNN_TYPE_POINTWISE_MODE &&
              cudnn::kTypeBackendDescriptor == CUDNN_TYPE_BACKEND_DESCRIPTOR &&
              cudnn::kTypeReductionOperatorType == CUDNN_TYPE_REDUCTION_OPERATOR_TYPE);
static_assert(cudnn::kDataFloat == CUDNN_DATA_FLOAT && cudnn::kDataHalf == CUDNN_DATA_HALF &&
              cudnn::kDataInt32 == CUDNN_DATA_INT32 && cudnn::kDataBFloat16 == CUDNN_DATA_BFLOAT16 &&
              cudnn::kDataBoolean == CUDNN_DATA_BOOLEAN);
static_assert(cudnn::kAdd == CUDNN_POINTWISE_ADD && cudnn::kMul == CUDNN_POINTWISE_MUL && cudnn::kDiv == CUDNN_POINTWISE_DIV &&
              cudnn::kSub == CUDNN_POINTWISE_SUB && cudnn::kExp == CUDNN_POINTWISE_EXP && cudnn::kLog == CUDNN_POINTWISE_LOG &&
              cudnn::kIdentity == CUDNN_POINTWISE_IDENTITY && cudnn::kCmpGe == CUDNN_POINTWISE_CMP_GE &&
              cudnn::kGenIndex == CUDNN_POINTWISE_GEN_INDEX && cudnn::kBinarySelect == CUDNN_POINTWISE_BINARY_SELECT);
static_assert(cudnn::kReduceAdd == CUDNN_REDUCE_TENSOR_ADD && cudnn::kReduceMax == CUDNN_REDUCE_TENSOR_MAX &&
              cudnn::kHeurModeA == CUDNN_HEUR_MODE_A && cudnn::kStatusSuccess == CUDNN_STATUS_SUCCESS);
// NCCL (dsl/cuda/nccl_api.h).
static_assert(sizeof(kiln::ncclUniqueId) == sizeof(::ncclUniqueId));
static_assert(nccl::kInt32 == ncclInt32 && nccl::kInt64 == ncclInt64 && nccl::kFloat16 == ncclFloat16 &&
              nccl::kFloat32 == ncclFloat32 && nccl::kFloat64 == ncclFloat64 && nccl::kBfloat16 == ncclBfloat16);
static_assert(nccl::kSum == ncclSum && nccl::kProd == ncclProd && nccl::kMax == ncclMax && nccl::kMin == ncclMin &&
              nccl::kAvg == ncclAvg && nccl::kSuccess == ncclSuccess && nccl::kInProgress == ncclInProgress);
#endif

BOOST_AUTO_TEST_CASE(constants_match_the_toolkit_headers) {
#if KILN_HAVE_CUDA_HEADERS
  BOOST_TEST_MESSAGE("checked against the CUDA toolkit's headers at build time");
#else
  BOOST_TEST_MESSAGE("no CUDA toolkit headers at build time: constants not checked");
#endif
  BOOST_TEST(true);
}

BOOST_AUTO_TEST_CASE(no_device_gives_a_clear_error) {
  if (cuda_available()) {
    BOOST_TEST_MESSAGE("a CUDA device is present: the no-device errors are not checked here");
    BOOST_TEST(cuda_unavailable_reason().empty());
    return;
  }
  BOOST_TEST(!cuda_unavailable_reason().empty());
  try {
    randn({2, 3}, {.device = Device::cuda()});
    BOOST_FAIL("no error");
  } catch (const Error& e) {
    std::string m = e.what();
    BOOST_TEST(m.find("cuda:0") != std::string::npos);
    BOOST_TEST(m.find(cuda_unavailable_reason()) != std::string::npos);
  }
  BOOST_CHECK_THROW(randn({2}).to(Device::cuda()), Error);
}
