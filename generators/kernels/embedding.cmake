# Embedding kernels (generators/embedding_kernels.cpp): row gathers that move raw bits, one per
# element size (bool 1 byte, f16 2, i32 4, i64 8) and index dtype.
foreach (index i32 i64)
  kiln_eager_kernel(GENERATOR kiln_embedding OP embedding VARIANT ${index} DTYPES bool f16 i32 i64
                    ATTRS "index_dtype:${index}")
endforeach ()

# embedding_backward: the scatter-add of gradient rows, per float dtype and index dtype.
foreach (index i32 i64)
  kiln_eager_kernel(GENERATOR kiln_embedding_backward OP embedding_backward VARIANT ${index} DTYPES f32 f64
                    ATTRS "index_dtype:${index}")
endforeach ()
