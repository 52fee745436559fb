#include "dsl/distributed/host_reduce.h"

#include <algorithm>
#include <cstdint>

#include "dsl/dtype.h"
#include "dsl/error.h"

namespace kiln::distributed {

namespace {

template <typename T>
void reduce_values(ReduceOp op, void* c_, const void* a_, const void* b_, size_t n) {
  T* c = static_cast<T*>(c_);
  const T* a = static_cast<const T*>(a_);
  const T* b = static_cast<const T*>(b_);
  for (size_t i = 0; i < n; ++i)
    c[i] = op == ReduceOp::max ? std::max(a[i], b[i]) : op == ReduceOp::min ? std::min(a[i], b[i]) : T(a[i] + b[i]);
}

template <float (*to_float)(uint16_t), uint16_t (*from_float)(float)>
void reduce_16bit(ReduceOp op, void* c_, const void* a_, const void* b_, size_t n) {
  uint16_t* c = static_cast<uint16_t*>(c_);
  const uint16_t* a = static_cast<const uint16_t*>(a_);
  const uint16_t* b = static_cast<const uint16_t*>(b_);
  for (size_t i = 0; i < n; ++i) {
    float x = to_float(a[i]), y = to_float(b[i]);
    c[i] = from_float(op == ReduceOp::max ? std::max(x, y) : op == ReduceOp::min ? std::min(x, y) : x + y);
  }
}

}  // namespace

HostReduce host_reduce(DType dtype, std::string_view what) {
  switch (dtype) {
    case DType::f32: return reduce_values<float>;
    case DType::f64: return reduce_values<double>;
    case DType::i32: return reduce_values<int32_t>;
    case DType::i64: return reduce_values<int64_t>;
    case DType::bf16: return reduce_16bit<bfloat16_to_float, float_to_bfloat16>;
    case DType::f16: return reduce_16bit<half_to_float, float_to_half>;
    default: throw_error(what, ": dtype ", dtype, " cannot be reduced (f32, f64, f16, bf16, i32, i64)");
  }
}

void divide(const Tensor& t, int n) {
  void* p = t.data_ptr();
  int64_t count = t.numel();
  if (t.dtype() == DType::f32) {
    float* f = static_cast<float*>(p);
    for (int64_t i = 0; i < count; ++i) f[i] /= float(n);
    return;
  }
  for (int64_t i = 0; i < count; ++i) store_from_double(p, t.dtype(), i, load_as_double(p, t.dtype(), i) / n);
}

}  // namespace kiln::distributed
