// dsl/cuda/ on any machine: the CUDA constants kiln declares itself (it loads the driver and
// cuBLAS with dlopen, without their headers) against the toolkit's headers where the toolkit is
// installed, and the errors a user gets for a CUDA tensor where no device is usable.
#include <boost/test/unit_test.hpp>

#include <cstddef>

#include "kiln.h"

#if KILN_HAVE_CUDA_HEADERS
#include <cublasLt.h>
#include <cublas_api.h>
#include <cuda.h>
#include <library_types.h>
#endif

using namespace kiln;

#if KILN_HAVE_CUDA_HEADERS
static_assert(sizeof(kiln::CUdeviceptr) == sizeof(::CUdeviceptr));
static_assert(kCublasOpN == CUBLAS_OP_N && kCublasOpT == CUBLAS_OP_T);
static_assert(kCudaR32F == CUDA_R_32F && kCudaR16F == CUDA_R_16F && kCudaR16BF == CUDA_R_16BF &&
              kCudaR64F == CUDA_R_64F);
static_assert(kCublasCompute32F == CUBLAS_COMPUTE_32F && kCublasCompute32FFastTf32 == CUBLAS_COMPUTE_32F_FAST_TF32 &&
              kCublasCompute64F == CUBLAS_COMPUTE_64F && kCublasGemmDefault == CUBLAS_GEMM_DEFAULT);
static_assert(kCublasLtDescTransA == CUBLASLT_MATMUL_DESC_TRANSA && kCublasLtDescTransB == CUBLASLT_MATMUL_DESC_TRANSB &&
              kCublasLtDescEpilogue == CUBLASLT_MATMUL_DESC_EPILOGUE &&
              kCublasLtDescBiasPointer == CUBLASLT_MATMUL_DESC_BIAS_POINTER &&
              kCublasLtEpilogueBias == CUBLASLT_EPILOGUE_BIAS &&
              kCublasLtPrefMaxWorkspaceBytes == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES);
static_assert(sizeof(kiln::CublasLtHeuristic) == sizeof(cublasLtMatmulHeuristicResult_t) &&
              offsetof(kiln::CublasLtHeuristic, workspace_size) == offsetof(cublasLtMatmulHeuristicResult_t, workspaceSize) &&
              offsetof(kiln::CublasLtHeuristic, state) == offsetof(cublasLtMatmulHeuristicResult_t, state));
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
