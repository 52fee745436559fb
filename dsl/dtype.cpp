#include "dsl/dtype.h"

#include <HalideRuntime.h>

#include <cmath>
#include <cstring>
#include <ostream>

#include "dsl/error.h"

namespace kiln {

size_t itemsize(DType t) {
  switch (t) {
    case DType::f32: case DType::i32: return 4;
    case DType::f64: case DType::i64: return 8;
    case DType::f16: case DType::bf16: return 2;
    case DType::bool_: return 1;
  }
  return 0;
}

halide_type_t halide_buffer_type(DType t) {
  auto bits = uint8_t(itemsize(t) * 8);
  if (t == DType::f32 || t == DType::f64 || t == DType::f16) return halide_type_t(halide_type_float, bits);
  if (t == DType::i32 || t == DType::i64) return halide_type_t(halide_type_int, bits);
  return halide_type_t(halide_type_uint, bits);
}

std::string_view name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
    case DType::bool_: return "bool";
  }
  return "?";
}

DType dtype_from_name(std::string_view n) {
  for (int i = 0; i < kNumDTypes; ++i)
    if (name(DType(i)) == n) return DType(i);
  throw_error("dtype: unknown name '", n, "' (expected f32, f64, f16, bf16, i32, i64 or bool)");
}

bool is_floating(DType t) {
  return t == DType::f32 || t == DType::f64 || t == DType::f16 || t == DType::bf16;
}
bool is_integral(DType t) { return t == DType::i32 || t == DType::i64; }

std::ostream& operator<<(std::ostream& os, DType t) { return os << name(t); }

namespace {
int category(DType t) { return t == DType::bool_ ? 0 : is_integral(t) ? 1 : 2; }
}  // namespace

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  if (category(a) != category(b)) return category(a) > category(b) ? a : b;
  if (category(a) == 1) return DType::i64;
  // Two different floats: the wider wins; f16 with bf16 meets at f32.
  if (a == DType::f64 || b == DType::f64) return DType::f64;
  return DType::f32;
}

DType to_floating(DType t) { return is_floating(t) ? t : DType::f32; }

float half_to_float(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: renormalize
      int e = -1;
      do { ++e; mant <<= 1; } while (!(mant & 0x400));
      bits = sign | uint32_t(127 - 15 - e) << 23 | (mant & 0x3ff) << 13;
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | mant << 13;
  } else {
    bits = sign | (exp + 127 - 15) << 23 | mant << 13;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint16_t sign = uint16_t((x >> 16) & 0x8000);
  uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) return sign | 0x7c00 | (absx > 0x7f800000u ? 0x200 : 0);  // inf / nan
  if (absx >= 0x477ff000u) return sign | 0x7c00;                                     // overflow
  if (absx < 0x38800000u) {                                                          // subnormal
    float a;
    std::memcpy(&a, &absx, 4);
    return sign | uint16_t(std::nearbyint(a * 16777216.0f));  // a / 2^-24, ties to even
  }
  uint32_t mant_round = absx + 0xfff + ((absx >> 13) & 1);  // round to nearest even
  return sign | uint16_t((mant_round - 0x38000000u) >> 13);
}

float bfloat16_to_float(uint16_t b) {
  uint32_t bits = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t float_to_bfloat16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40);  // quiet nan
  return uint16_t((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

double load_as_double(const void* data, DType t, int64_t i) {
  switch (t) {
    case DType::f32: return static_cast<const float*>(data)[i];
    case DType::f64: return static_cast<const double*>(data)[i];
    case DType::f16: return half_to_float(static_cast<const uint16_t*>(data)[i]);
    case DType::bf16: return bfloat16_to_float(static_cast<const uint16_t*>(data)[i]);
    case DType::i32: return static_cast<const int32_t*>(data)[i];
    case DType::i64: return double(static_cast<const int64_t*>(data)[i]);
    case DType::bool_: return static_cast<const uint8_t*>(data)[i] ? 1.0 : 0.0;
  }
  return 0;
}

void store_from_double(void* data, DType t, int64_t i, double v) {
  switch (t) {
    case DType::f32: static_cast<float*>(data)[i] = float(v); break;
    case DType::f64: static_cast<double*>(data)[i] = v; break;
    case DType::f16: static_cast<uint16_t*>(data)[i] = float_to_half(float(v)); break;
    case DType::bf16: static_cast<uint16_t*>(data)[i] = float_to_bfloat16(float(v)); break;
    case DType::i32: static_cast<int32_t*>(data)[i] = int32_t(v); break;
    case DType::i64: static_cast<int64_t*>(data)[i] = int64_t(v); break;
    case DType::bool_: static_cast<uint8_t*>(data)[i] = v != 0; break;
  }
}

}  // namespace kiln
