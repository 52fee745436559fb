# Pointwise kernels: unary, binary, where, cast, and raw copies.
set(float f32 f64)
set(numeric f32 f64 i32 i64)

foreach (op neg abs square relu)
  kiln_eager_kernel(GENERATOR kiln_pointwise OP ${op} DTYPES ${numeric})
endforeach ()
foreach (op exp log sqrt rsqrt sin cos tanh sigmoid silu reciprocal softplus erf)
  kiln_eager_kernel(GENERATOR kiln_pointwise OP ${op} DTYPES ${float})
endforeach ()
kiln_eager_kernel(GENERATOR kiln_pointwise OP isfinite DTYPES ${numeric})
kiln_eager_kernel(GENERATOR kiln_pointwise OP gelu VARIANT none DTYPES ${float} ATTRS "approximate:none")
kiln_eager_kernel(GENERATOR kiln_pointwise OP gelu VARIANT tanh DTYPES ${float} ATTRS "approximate:tanh")
kiln_eager_kernel(GENERATOR kiln_pointwise OP gelu_backward VARIANT none DTYPES ${float} ATTRS "approximate:none")
kiln_eager_kernel(GENERATOR kiln_pointwise OP gelu_backward VARIANT tanh DTYPES ${float} ATTRS "approximate:tanh")

foreach (op add sub mul maximum minimum eq ne lt le gt ge)
  kiln_eager_kernel(GENERATOR kiln_pointwise OP ${op} DTYPES ${numeric})
endforeach ()
foreach (op div pow)
  kiln_eager_kernel(GENERATOR kiln_pointwise OP ${op} DTYPES ${float})
endforeach ()
kiln_eager_kernel(GENERATOR kiln_pointwise OP where DTYPES ${numeric} bool)

foreach (to f32 f64 f16 bf16 i32 i64 bool)
  foreach (from f32 f64 f16 bf16 i32 i64 bool)
    if (NOT from STREQUAL to)
      kiln_eager_kernel(GENERATOR kiln_pointwise OP cast VARIANT ${to} DTYPES ${from} ATTRS "dtype:${to}")
    endif ()
  endforeach ()
endforeach ()

# Copies move raw bits: one kernel per element size (bool: 1 byte, f16: 2, i32: 4, i64: 8).
kiln_eager_kernel(GENERATOR kiln_pointwise OP contiguous DTYPES bool f16 i32 i64)
