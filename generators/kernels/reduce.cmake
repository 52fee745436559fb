# Reduction kernels: canonical [reduced, kept] -> [kept] (generators/reduce_kernels.cpp). f16 and
# bf16 compute through f32, bool through i32; integer sums accumulate in i64.
foreach (op sum max min argmax)
  kiln_eager_kernel(GENERATOR kiln_reduce OP ${op} DTYPES f32 f64 i32 i64)
endforeach ()
foreach (op mean var logsumexp)
  kiln_eager_kernel(GENERATOR kiln_reduce OP ${op} DTYPES f32 f64)
endforeach ()
# Row-wise softmax and log_softmax (kiln_rows, in reduce_kernels.cpp): f32 and f64; f16, bf16 and
# integer inputs compute through f32.
foreach (op softmax log_softmax)
  kiln_eager_kernel(GENERATOR kiln_rows OP ${op} DTYPES f32 f64)
endforeach ()
