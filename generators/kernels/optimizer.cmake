# Fused optimizer updates (generators/optimizer_kernels.cpp): AdamW, one generator per dtype.
kiln_eager_kernel(GENERATOR kiln_adamw_f32 OP adamw DTYPES f32)
kiln_eager_kernel(GENERATOR kiln_adamw_f64 OP adamw DTYPES f64)
