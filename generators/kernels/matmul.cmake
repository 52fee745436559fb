# Matmul kernels (generators/matmul_kernels.cpp): a register-tiled GEMM for M >= 8 and N >= 32, and
# a row-at-a-time kernel for any size. f16/bf16 compute through the f32 kernels. CUDA matmul is
# cuBLAS (dsl/eager/cublas_matmul.cpp).
kiln_eager_kernel(GENERATOR kiln_matmul OP matmul VARIANT tiled DTYPES f32 f64 ATTRS "schedule:tiled" NO_CUDA)
kiln_eager_kernel(GENERATOR kiln_matmul OP matmul VARIANT rows DTYPES f32 f64 ATTRS "schedule:rows" NO_CUDA)
