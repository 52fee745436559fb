# Row-wise normalization kernels (generators/normalization_kernels.cpp): f32 and f64; f16, bf16
# and integer inputs compute through f32. softmax and log_softmax are built by kiln_rows
# (reduce.cmake).
kiln_eager_kernel(GENERATOR kiln_layer_norm OP layer_norm VARIANT affine DTYPES f32 f64 ATTRS "affine:true")
kiln_eager_kernel(GENERATOR kiln_layer_norm OP layer_norm VARIANT plain DTYPES f32 f64 ATTRS "affine:false")
kiln_eager_kernel(GENERATOR kiln_cross_entropy OP cross_entropy DTYPES f32 f64)
# Their fused backward ops (eager autograd; compiled backwards keep the composite).
kiln_eager_kernel(GENERATOR kiln_layer_norm OP layer_norm_backward VARIANT affine DTYPES f32 f64 ATTRS "affine:true")
kiln_eager_kernel(GENERATOR kiln_layer_norm OP layer_norm_backward VARIANT plain DTYPES f32 f64 ATTRS "affine:false")
kiln_eager_kernel(GENERATOR kiln_cross_entropy_backward OP cross_entropy_backward DTYPES f32 f64)
# CUDA: layer_norm and its backward with a warp per row, for dense rows of up to 1024 elements.
foreach (op layer_norm layer_norm_backward)
  kiln_eager_kernel(GENERATOR kiln_layer_norm OP ${op} VARIANT affine_warp DTYPES f32 ATTRS "affine:true" SCHEDULE warp CUDA_ONLY)
  kiln_eager_kernel(GENERATOR kiln_layer_norm OP ${op} VARIANT plain_warp DTYPES f32 ATTRS "affine:false" SCHEDULE warp CUDA_ONLY)
endforeach ()
