// Every op table, in the registry's order (compiled twice, as op_tables.h says).
#include "dsl/ops/op_tables.h"

#ifndef KILN_OP_DEFS_RUNTIME
// Referenced by kiln_defs' link options, so that every program linking kiln_defs has the Halide
// tables (op_registry.cpp finds them through a weak reference).
extern "C" {
int kiln_halide_op_tables_linked = 1;
}
#endif

namespace kiln::KILN_OP_TABLES {

void add_all_ops(std::vector<OpDef>& defs) {
  add_unary_ops(defs);
  add_binary_ops(defs);
  add_cast_ops(defs);
  add_view_ops(defs);
  add_reduce_ops(defs);
  add_normalization_ops(defs);
  add_matmul_ops(defs);
  add_embedding_ops(defs);
  add_cat_ops(defs);
  add_creation_ops(defs);
  add_attention_ops(defs);
}

}  // namespace kiln::KILN_OP_TABLES
