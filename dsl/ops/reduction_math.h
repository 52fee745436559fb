// Halide building blocks of reductions, shared by the reduction ops (dsl/ops/reduce.cpp) and the
// definitions that reduce inside (softmax, log_softmax, layer_norm, cross_entropy). They work on
// HalideTensors of any rank over a sorted list of kiln dims. Every reduction is one Func indexed by
// the kept dims, with a pure init and one update over an RDom of the reduced dims: schedules find
// the reductions of a pipeline (the Funcs with an update) and split, rfactor or vectorize them.
//
//   ReductionIndex ix(x, {1});                          // reduce dim 1 of a rank-2 tensor
//   Func s = reduce_func(ix, Combine::sum, value_at(x, ix.args, Float(32)), "sum");
//   // s(k) is the sum of row k; s(kept_args(full_args, {1}, 2)) reads it at an element of x.
#pragma once
#include <string>
#include <vector>

#include "dsl/halide_def.h"

namespace kiln {

// The index space of a reduction of x over sorted kiln `dims`: Vars for the kept dims, an RDom over
// the reduced dims (a single point when there are none) and x's arguments mixing the two.
struct ReductionIndex {
  ReductionIndex(const HalideTensor& x, const std::vector<int>& dims);

  std::vector<int> dims;                 // reduced kiln dims, sorted
  int rank = 0;                          // x's rank
  std::vector<Halide::Var> kept;         // Halide order (innermost first)
  Halide::RDom r;                        // innermost reduced dim first
  std::vector<Halide::Expr> args;        // x's arguments, Halide order
  std::vector<Halide::Expr> kept_shape;  // kiln order
  Halide::Expr count;                    // number of reduced elements (Int(32))
};

enum class Combine { sum, max, min };

// One reduction Func over ix.kept: `value` (an Expr of ix.args) combined from the identity.
Halide::Func reduce_func(const ReductionIndex& ix, Combine c, Halide::Expr value, const std::string& name);

// x's element at `args` as a value of type t.
Halide::Expr value_at(const HalideTensor& x, const std::vector<Halide::Expr>& args, Halide::Type t);
// The arguments of a reduced Func for an element of the full tensor (reduced dims dropped).
std::vector<Halide::Expr> kept_args(const std::vector<Halide::Expr>& full_args, const std::vector<int>& dims,
                                    int rank);
// A reduced tensor (kept dims only) seen with the reduced dims as size-1 dims (keepdim).
HalideTensor keep_dims(const HalideTensor& reduced, const std::vector<int>& dims, int rank);

// The compute type of float results: f64 stays, everything else computes in f32.
Halide::Type float_type(DType t);

// Two-pass moments in type t: the mean, and the sum of squared deviations from it.
struct Moments {
  Halide::Func mean, m2;
};
Moments moments(const HalideTensor& x, const ReductionIndex& ix, Halide::Type t);

// log(sum(exp(x))) in type t, stable: max + log(sum(exp(x - max))). Callers that subtract it from x
// use the parts, (x - max) - log_sum, which keeps the rounding of a small result small.
struct LogSumExp {
  Halide::Func max, log_sum;
};
LogSumExp logsumexp_parts(const HalideTensor& x, const ReductionIndex& ix, Halide::Type t);
// The whole value; a row whose max is infinite gives that max (Halide's exp and log are
// approximations that do not handle infinities).
Halide::Func logsumexp_func(const HalideTensor& x, const ReductionIndex& ix, Halide::Type t);

}  // namespace kiln
