#include "dsl/halide_def.h"

namespace kiln {

using namespace Halide;

Type halide_type(DType t) { return Type(halide_buffer_type(t)); }

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
