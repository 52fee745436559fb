// The op tables of dsl/ops/: each file adds its ops to the registry's list.
//
// Each table file is compiled twice. Into kiln_defs (the generators and kiln::kiln, which compile
// Halide pipelines) as written; into kiln_defs_runtime (kiln::runtime: eager ops, autograd and
// ahead-of-time models, without libHalide) with KILN_OP_DEFS_RUNTIME defined, where every Halide
// part of an op, written KILN_HALIDE(definition), becomes a stub that raises kiln::Error if called.
// The ops' shape rules and properties are the same code in both. The two builds' functions live in
// different namespaces (halide_tables, runtime_tables); the registry (op_registry.cpp) uses the
// Halide tables wherever kiln_defs is linked.
#pragma once
#include <functional>
#include <vector>

#include "dsl/error.h"
#include "dsl/op_def.h"

#ifdef KILN_OP_DEFS_RUNTIME
#define KILN_OP_TABLES runtime_tables
#define KILN_HALIDE(...) ::kiln::NoHalideDefinition()
#else
#define KILN_OP_TABLES halide_tables
#define KILN_HALIDE(...) __VA_ARGS__
#endif

namespace kiln {

// Where KILN_HALIDE(...) stands in kiln_defs_runtime: converts to any std::function type of an
// op's Halide part (its arguments taken by reference, so no Halide value is built or destroyed).
struct NoHalideDefinition {
  template <typename R, typename... A>
  operator std::function<R(A...)>() const {
    return [](auto&&...) -> R {
      throw_error("this op's Halide definition is not part of kiln::runtime (link kiln::kiln to compile pipelines)");
    };
  }
};

namespace KILN_OP_TABLES {
void add_all_ops(std::vector<OpDef>& defs);  // all of these, in the registry's order
void add_unary_ops(std::vector<OpDef>& defs);
void add_binary_ops(std::vector<OpDef>& defs);
void add_cast_ops(std::vector<OpDef>& defs);
void add_view_ops(std::vector<OpDef>& defs);
void add_reduce_ops(std::vector<OpDef>& defs);
void add_normalization_ops(std::vector<OpDef>& defs);
void add_matmul_ops(std::vector<OpDef>& defs);
void add_embedding_ops(std::vector<OpDef>& defs);
void add_cat_ops(std::vector<OpDef>& defs);
void add_creation_ops(std::vector<OpDef>& defs);
void add_attention_ops(std::vector<OpDef>& defs);
}  // namespace KILN_OP_TABLES

// The dtype inputs of a pointwise op promote to. A 0-d tensor (a wrapped scalar) only raises the
// category (bool < integer < float), as in PyTorch: x_f16 * 2.0 stays f16.
DType result_type(const std::vector<TensorMeta>& in);
// The broadcast shape of all inputs, with `op` in the error.
Shape broadcast_all(std::string_view op, const std::vector<TensorMeta>& in);
// Checks that all inputs are on one device and returns it.
Device common_device(std::string_view op, const std::vector<TensorMeta>& in);

}  // namespace kiln
