// The op tables of dsl/ops/: each file adds its ops to the registry's list. Shared shape rules
// of the pointwise ops live here too.
#pragma once
#include <vector>

#include "dsl/op_def.h"

namespace kiln {

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

// The dtype inputs of a pointwise op promote to. A 0-d tensor (a wrapped scalar) only raises the
// category (bool < integer < float), as in PyTorch: x_f16 * 2.0 stays f16.
DType result_type(const std::vector<TensorMeta>& in);
// The broadcast shape of all inputs, with `op` in the error.
Shape broadcast_all(std::string_view op, const std::vector<TensorMeta>& in);
// Checks that all inputs are on one device and returns it.
Device common_device(std::string_view op, const std::vector<TensorMeta>& in);

}  // namespace kiln
