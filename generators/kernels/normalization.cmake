# Row-wise normalization kernels (generators/normalization_kernels.cpp): f32 and f64; f16, bf16
# and integer inputs compute through f32. softmax and log_softmax are built by kiln_rows
# (reduce.cmake).
kiln_eager_kernel(GENERATOR kiln_layer_norm OP layer_norm VARIANT affine DTYPES f32 f64 ATTRS "affine:true")
kiln_eager_kernel(GENERATOR kiln_layer_norm OP layer_norm VARIANT plain DTYPES f32 f64 ATTRS "affine:false")
kiln_eager_kernel(GENERATOR kiln_cross_entropy OP cross_entropy DTYPES f32 f64)
