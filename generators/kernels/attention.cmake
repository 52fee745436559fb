# The attention op's probabilities on CUDA (generators/attention_kernels.cpp): the forward's
# probabilities and log-sum-exp from the scores, and the probabilities again from a saved
# log-sum-exp for the backward. f32; the CPU runs the op as one fused kernel (dsl/eager/attention.cpp).
kiln_eager_kernel(GENERATOR kiln_attention_probs OP attention VARIANT probs DTYPES f32 CUDA_ONLY)
kiln_eager_kernel(GENERATOR kiln_attention_probs OP attention VARIANT from_lse DTYPES f32 ATTRS "lse:given" CUDA_ONLY)
