// The program tests/CMakeLists.txt compiles ahead of time with kiln_add_model (model aot_block):
// a transformer block times a second input, batch dynamic. test_linked_model links the library
// and also calls this entry for the reference.
#include "aot/program.h"
#include "kiln.h"

kiln::aot::Program make_aot_test_block() {
  using namespace kiln;
  manual_seed(21);
  auto block = std::make_shared<nn::TransformerBlock>(32, 4, "tanh");
  block->eval();
  return {block,
          {{"x", randn({4, 16, 32})}, {"scale", randn({4, 16, 32})}},
          [block](const TensorList& in) { return TensorList{block->forward(in[0]) * in[1]}; }};
}
