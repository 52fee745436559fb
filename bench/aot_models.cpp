// The zoo models that `kiln bench aot` runs ahead of time: bench/CMakeLists.txt builds each
// through kiln_add_model from these entries (every size static, as the JIT's first compile sees
// them): the MLP and the transformer block at bench size, the block at test size too.
#include "aot/program.h"
#include "bench/zoo.h"

namespace {

kiln::aot::Program zoo_program(const std::string& name, kiln::zoo::ZooSize size = kiln::zoo::ZooSize::bench) {
  kiln::manual_seed(0);
  auto m = std::make_shared<kiln::zoo::ZooModel>(kiln::zoo::make_zoo_model(name, size));
  kiln::TensorList in = m->make_inputs();
  KILN_CHECK(in.size() == 1, "bench aot: zoo model ", name, " takes ", in.size(), " inputs; its entry names one");
  return {m->module, {{"x", in[0]}}, [m](const kiln::TensorList& xs) { return m->forward(xs); }};
}

}  // namespace

kiln::aot::Program make_bench_aot_mlp() { return zoo_program("mlp"); }
kiln::aot::Program make_bench_aot_transformer_block() { return zoo_program("transformer_block"); }
kiln::aot::Program make_bench_aot_transformer_block_test() {
  return zoo_program("transformer_block", kiln::zoo::ZooSize::test);
}
