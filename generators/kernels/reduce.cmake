# Reduction kernels: canonical [reduced, kept] -> [kept] (generators/reduce_kernels.cpp). f16 and
# bf16 compute through f32, bool through i32; integer sums accumulate in i64.
foreach (op sum max min argmax)
  kiln_eager_kernel(GENERATOR kiln_reduce OP ${op} DTYPES f32 f64 i32 i64)
endforeach ()
# CUDA: sum and mean over rows laid out across memory (the results adjacent: a bias gradient over
# B*T rows) as chunks of rows in parallel; the general kernel reads such rows uncoalesced.
foreach (op sum mean)
  kiln_eager_kernel(GENERATOR kiln_reduce OP ${op} VARIANT columns DTYPES f32 f64 SCHEDULE columns CUDA_ONLY)
endforeach ()
foreach (op mean var logsumexp)
  kiln_eager_kernel(GENERATOR kiln_reduce OP ${op} DTYPES f32 f64)
endforeach ()
# Row-wise softmax and log_softmax and their fused backward ops (kiln_rows, in reduce_kernels.cpp): f32 and f64; f16, bf16 and
# integer inputs compute through f32.
foreach (op softmax log_softmax softmax_backward log_softmax_backward)
  kiln_eager_kernel(GENERATOR kiln_rows OP ${op} DTYPES f32 f64)
endforeach ()
# CUDA: the same ops with a warp per row (generators/row_schedule.h), which the runner picks for
# dense rows of up to 1024 elements.
foreach (op softmax log_softmax softmax_backward log_softmax_backward)
  kiln_eager_kernel(GENERATOR kiln_rows OP ${op} VARIANT warp DTYPES f32 SCHEDULE warp CUDA_ONLY)
endforeach ()
