#include "dsl/halide_def.h"

namespace kiln {

using namespace Halide;

Type halide_type(DType t) {
  switch (t) {
    case DType::f32: return Float(32);
    case DType::f64: return Float(64);
    case DType::f16: return Float(16);
    case DType::bf16: return UInt(16);
    case DType::i32: return Int(32);
    case DType::i64: return Int(64);
    case DType::bool_: return UInt(8);
  }
  return Float(32);
}

Expr load_value(Expr stored, DType t) {
  if (t == DType::bf16) return reinterpret(Float(32), cast(UInt(32), stored) << 16);
  if (t == DType::bool_) return cast(UInt(8), stored != 0);
  return stored;
}

Expr store_value(Expr value, DType t) {
  if (t == DType::bf16) {
    Expr v = cast(Float(32), value);
    Expr bits = reinterpret(UInt(32), v);
    Expr rounded = (bits + 0x7fff + ((bits >> 16) & 1)) >> 16;
    Expr nan = (bits & 0x7fffffff) > 0x7f800000;
    return cast(UInt(16), select(nan, (bits >> 16) | 0x40, rounded));
  }
  if (t == DType::bool_) return cast(UInt(8), select(value != Halide::Internal::make_zero(value.type()), 1, 0));
  return cast(halide_type(t), value);
}

std::vector<Var> halide_vars(int rank) {
  std::vector<Var> v;
  for (int i = 0; i < rank; ++i) v.push_back(Var("d" + std::to_string(i)));
  return v;
}

}  // namespace kiln
