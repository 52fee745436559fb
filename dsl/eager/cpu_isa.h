// What the host CPU offers the kernels built per instruction set (dsl/eigen_gemm/): the best ISA
// build it can run, and how many tasks to split a kernel into on Halide's thread pool (the pool
// the eager kernels use, so the two never oversubscribe the machine).
#pragma once

namespace kiln {

enum class CpuIsa { baseline, avx2, avx512 };

CpuIsa cpu_isa();              // detected once
const char* name(CpuIsa isa);  // "avx512", "avx2", "baseline"
int cpu_kernel_threads();      // HL_NUM_THREADS, else the hardware's thread count

}  // namespace kiln
