# arange and linspace as kernels (generators/creation_kernels.cpp): the CUDA path fills tensors on
# the device with them; other dtypes are made on the host and copied.
kiln_eager_kernel(GENERATOR kiln_iota OP arange DTYPES f32 i32 i64)
