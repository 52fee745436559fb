// A model with a custom op, compiled ahead of time by kiln_add_model (model aot_custom_op,
// tests/CMakeLists.txt): a Linear, then "aot_test::softsign_scale" (x / (1 + |x|) * scale, a C++
// kernel over tensors with a derivative rule), then a ReLU. The op is registered by
// register_aot_test_ops(), which the generator runs through the entry and a program that links
// the library calls before it loads the model (the model's graph names the op).
#pragma once
#include "aot/program.h"
#include "dsl/op_def.h"

namespace kiln::aot_test {

// Registers aot_test::softsign_scale once per process and returns it.
const OpDef& register_aot_test_ops();

}  // namespace kiln::aot_test

kiln::aot::Program make_aot_test_custom_op();
