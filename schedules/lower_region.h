// Lowering: a region of a captured graph (a run of nodes) becomes one Halide pipeline, built from
// the ops' own Halide definitions (dsl/ops/): a pointwise op is one Expr of its inputs' values, so
// a chain of them is one expression; other ops build Funcs from their inputs' Funcs; views are
// index arithmetic on their input's Func, never copies. Sizes are constants where the graph knows
// them and scalar parameters (one per symbol) where it does not.
#pragma once
#include <Halide.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "dsl/halide_def.h"
#include "graph/graph.h"
#include "schedules/lowerable.h"
#include "schedules/region.h"

namespace kiln {

// A matmul lowered as a GEMM on a packed weight: acc(j, m, batch..., p) sums one output row m of
// panel p (32 columns, j); the matmul's value is acc read back at (n % 32, m, ..., n / 32).
struct LoweredGemm {
  Halide::Func acc;
  int value = -1;  // the matmul's output
  int root = -1;   // the value whose Func the GEMM's tiles are computed in: the matmul's own, or
                   // the last op of its pointwise epilogue (bias, activation, residual add)
};

struct LoweredRegion {
  std::vector<Halide::ImageParam> inputs;  // one per Region::inputs, strides free
  std::map<int, Halide::Param<int32_t>> symbols;  // Region::symbols -> their sizes at run time
  // The pipeline's outputs, their buffers in Region::outputs order: one Func per region output,
  // or one Tuple-valued Func for consecutive outputs computed together (tuple_outputs.h).
  std::vector<Halide::Func> outputs;
  std::vector<int> output_values;  // per Func of outputs: the value whose schedule it takes
  std::vector<Halide::Func> materialized;  // outputs of non-pointwise nodes and shared values
  std::map<int, HalideTensor> values;      // every value of the region, by id
  std::vector<LoweredGemm> gemms;
  std::set<std::string> transposed_inputs;  // inputs whose innermost dim is not dense (their names)
  // Row ops left unstored, inlined into their one pointwise reader (see lower_region.cpp): their
  // Funcs' names -> their values. The reader's schedule computes their reductions row by row.
  std::map<std::string, int> fused_row_ops;
  // Reductions left unstored because their one reader chain (pointwise ops of the reduced shape,
  // views) ends at a stored value: that value -> the reduction. Its Func computes the reduction
  // (a column sum and its reshape to a bias gradient are one Func, not two).
  std::map<int, int> reduction_epilogues;
};

// The shape of the region's k-th input as the pipeline reads it (packed weights as panels).
Shape region_input_shape(const Graph& g, const Region& r, size_t k);

// The root symbols the dims of the region's values mention, in increasing order.
std::vector<int> region_symbols(const Graph& g, const Region& r);

LoweredRegion lower_region(const Graph& g, const Region& r);

// The dtype a pointwise op computes in for values stored as `t`: f16/bf16 in f32 and bool in
// i32, like the eager kernels.
DType widened(DType t);

// Constrains an output buffer to a dense tensor of `shape` (outermost dim first): the extents and
// strides Halide then knows, constants where the shape is static. set_dense_strides: the strides
// only (a Tuple's buffers after the first take the first one's mins and extents).
void set_dense_shape(Halide::OutputImageParam buffer, const std::vector<Halide::Expr>& shape);
void set_dense_strides(Halide::OutputImageParam buffer, const std::vector<Halide::Expr>& shape);

// The pipeline's arguments in calling order: the inputs, then the symbols in Region::symbols order.
std::vector<Halide::Argument> pipeline_arguments(const Region& r, const LoweredRegion& lowered);

}  // namespace kiln
