// cast: conversion between dtypes (to(dtype)); float -> integer truncates toward zero,
// anything -> bool is "not zero", f16/bf16 round to nearest even.
#include "dsl/halide_def.h"
#include "dsl/ops/op_tables.h"

namespace kiln {

void KILN_OP_TABLES::add_cast_ops(std::vector<OpDef>& defs) {
  OpDef d;
  d.name = "cast";
  d.schedule_class = ScheduleClass::pointwise;
  d.family = KernelFamily::cast;
  d.num_inputs = 1;
  // A few integer or float instructions an element (bf16 -> f32 is a shift): recomputed where it
  // is read. Across regions only where it widens (fusion.cpp): a reader then loads fewer bytes.
  d.cheap = true;
  d.compute_dtype = [](const std::vector<TensorMeta>& in) { return in[0].dtype; };
  d.infer = [](const std::vector<TensorMeta>& in, const Attrs& a) {
    return std::vector<TensorMeta>{{in[0].shape, dtype_from_name(a.get<std::string>("dtype")), in[0].device}};
  };
  // The generator converts the stored input to its value type first; the result is stored as
  // the target dtype by the kernel's store_value.
  d.pointwise = KILN_HALIDE([](const std::vector<Halide::Expr>& in, const Attrs&) { return in[0]; });
  defs.push_back(std::move(d));
}

}  // namespace kiln
