// The eager matmul on CUDA: cuBLAS's strided-batched GemmEx on kiln's stream, for the batched
// problems dsl/eager/matmul.cpp plans. f32 runs in full f32 unless the float32 matmul precision
// is "high" (TF32 tensor cores, like PyTorch's torch.backends.cuda.matmul.allow_tf32); f16 and
// bf16 read and write their dtype and accumulate in f32; f64 in f64.
//
//   set_float32_matmul_precision(Float32MatmulPrecision::high);   // TF32 from here on
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "dsl/eager/eigen_gemm.h"

namespace kiln {

class Tensor;

enum class Float32MatmulPrecision { highest, high };
void set_float32_matmul_precision(Float32MatmulPrecision p);
Float32MatmulPrecision float32_matmul_precision();

// c = a @ b for one planned problem (element offsets oa, ob, oc into the tensors' data), all on
// one CUDA device with one dtype. Operands whose matrices are neither row- nor column-major must
// be made contiguous by the caller (cublas_operand_ok tells).
void cublas_gemm(const Tensor& a, const Tensor& b, const Tensor& out, const GemmProblem& p, int64_t oa,
                 int64_t ob, int64_t oc);
// c = a @ b for every problem of a host loop (offsets: each iteration's element offsets into a, b
// and out) and every batch index of p inside it, in pointer-array batched cuBLAS calls: batch dims
// that no one stride walks (attention's heads split out of one projection) run without copying
// their operands. The pointer arrays go up with cuda_upload_arguments (no host wait).
void cublas_gemm_each(const Tensor& a, const Tensor& b, const Tensor& out, const GemmProblem& p,
                      const std::vector<std::array<int64_t, 3>>& offsets);
// What cuBLASLt computes in a GEMM's epilogue, on the product P = a @ b (out [m, n]):
//   bias           out = P + bias (bias [n], added to every row)
//   bias_gelu      out = gelu(P + bias), GELU's tanh form (cuBLASLt has no other)
//   bias_gelu_aux  the same, and aux = P + bias (GELU's input, which its derivative reads)
//   dgelu          out = P * gelu'(aux), the tanh form: the gradient of GELU's input
//   bgradb         out = P, and bias = a summed along k ([m]): a Linear's bias gradient beside its
//                  weight gradient (a = dy^T)
enum class GemmEpilogue { bias, bias_gelu, bias_gelu_aux, dgelu, bgradb };

// out = epilogue(a @ b) for one matrix (p.batch == 1) through cuBLASLt: the GEMM writes its output
// once, with no pass of its own for the epilogue. bias is read, or written (bgradb); aux is
// [m, n], dense like out. Descriptors are made once per problem form; its first call times the
// heuristic's candidate algorithms and keeps the fastest. Returns false, having queued nothing, where
// cuBLASLt offers no algorithm for the form (or aux's row length is not a multiple of 8): the
// caller then computes it another way.
bool cublas_gemm_epilogue(const Tensor& a, const Tensor& b, const Tensor& out, const GemmProblem& p, GemmEpilogue e,
                          const Tensor& bias, const Tensor& aux);
bool cublas_operand_ok(const GemmStrides& s, int64_t rows, int64_t cols);

}  // namespace kiln
