// Element types of tensors, their sizes and names, and the type promotion rule of binary ops
// (bool < integers < floating; within a category the wider type wins; f16 with bf16 gives f32).
#pragma once
#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <string_view>

struct halide_type_t;  // HalideRuntime.h

namespace kiln {

enum class DType : uint8_t { f32, f64, f16, bf16, i32, i64, bool_ };
inline constexpr int kNumDTypes = 7;

inline constexpr DType f32 = DType::f32;
inline constexpr DType f64 = DType::f64;
inline constexpr DType f16 = DType::f16;
inline constexpr DType bf16 = DType::bf16;
inline constexpr DType i32 = DType::i32;
inline constexpr DType i64 = DType::i64;
inline constexpr DType bool_ = DType::bool_;

size_t itemsize(DType t);
std::string_view name(DType t);
DType dtype_from_name(std::string_view name);  // "f32", ...; throws kiln::Error on unknown names
bool is_floating(DType t);
bool is_integral(DType t);  // i32, i64 (not bool)
std::ostream& operator<<(std::ostream& os, DType t);
// The element type of a Halide buffer of dtype t: bool as uint8, bf16 as its uint16 bits, f16 as
// float16 (halide_def.h's halide_type is the same type in the compiler's terms).
halide_type_t halide_buffer_type(DType t);

// The dtype of a binary op's result.
DType promote_types(DType a, DType b);
// The dtype a float op computes in: floating types stay, integers and bool become f32.
DType to_floating(DType t);

// The C++ type stored for each dtype (f16 and bf16 are raw 16-bit patterns).
struct Half { uint16_t bits; };
struct BFloat16 { uint16_t bits; };
template <typename T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::f32; }
template <> constexpr DType dtype_of<double>() { return DType::f64; }
template <> constexpr DType dtype_of<Half>() { return DType::f16; }
template <> constexpr DType dtype_of<BFloat16>() { return DType::bf16; }
template <> constexpr DType dtype_of<int32_t>() { return DType::i32; }
template <> constexpr DType dtype_of<int64_t>() { return DType::i64; }
template <> constexpr DType dtype_of<bool>() { return DType::bool_; }

// Conversions of the 16-bit float formats (round to nearest even).
float half_to_float(uint16_t bits);
uint16_t float_to_half(float f);
float bfloat16_to_float(uint16_t bits);
uint16_t float_to_bfloat16(float f);

// Reads element i of a buffer of dtype t as a double / writes a double into it.
double load_as_double(const void* data, DType t, int64_t i);
void store_from_double(void* data, DType t, int64_t i, double v);

}  // namespace kiln
