// What an op's Halide definition works on: a tensor inside a Halide pipeline. Funcs are indexed
// innermost dim first (Halide's order), shapes are kept in kiln's order (outermost first).
// Only op definitions, generators/ and schedules/ include this (it pulls in Halide.h).
#pragma once
#include <Halide.h>

#include <functional>
#include <vector>

#include "dsl/dtype.h"
#include "dsl/op_def.h"
#include "dsl/shape.h"

namespace kiln {

struct HalideTensor {
  Halide::Func func;
  std::vector<Halide::Expr> shape;  // kiln order
  DType dtype = DType::f32;

  int rank() const { return int(shape.size()); }
  // The extent of kiln dim d (d may be negative).
  Halide::Expr dim(int d) const { return shape[d < 0 ? d + rank() : d]; }
};

// The Halide type a dtype is stored as (bool as uint8, bf16 as uint16 bits, f16 as float16):
// dtype.h's halide_buffer_type.
Halide::Type halide_type(DType t);
// Loads of stored values as the value type they compute in, and back (bf16 bits <-> f32).
Halide::Expr load_value(Halide::Expr stored, DType t);
Halide::Expr store_value(Halide::Expr value, DType t);

// What a view's index rule (OpDef::view.index) knows of its input and output, dims outermost
// first: the traced sizes, the extents inside the pipeline (symbolic for dynamic dims), which dims
// have size 1 at every call (not just at the traced one), and whether a run of input dims and a run
// of output dims hold the same number of elements at every call (the graph's shape environment
// decides; a reshape's index arithmetic is split into such runs).
struct ViewIndexShapes {
  Shape in, out;
  std::vector<Halide::Expr> in_extent, out_extent;
  std::function<bool(int d)> in_dim_is_one, out_dim_is_one;
  std::function<bool(int in_begin, int in_end, int out_begin, int out_end)> same_count;
};

// Vars for a Func of `rank` dims, innermost first.
std::vector<Halide::Var> halide_vars(int rank);

}  // namespace kiln
