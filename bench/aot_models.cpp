// The zoo models that `kiln bench aot` runs ahead of time: bench/CMakeLists.txt builds each
// through kiln_add_model from these entries (every size static, as the JIT's first compile sees
// them): the MLP and the transformer block at bench size, the block at test size too; and a row
// chain without weights (softmax, GELU, log-softmax over rows of 1024), whose rows' length
// bench/CMakeLists.txt also builds dynamic, with and without a specialization for lengths
// divisible by 16.
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
kiln::aot::Program make_bench_aot_row_chain() {
  using namespace kiln;
  manual_seed(0);
  return {nullptr, {{"x", randn({2048, 1024})}},
          [](const TensorList& in) { return TensorList{log_softmax(gelu(in[0]) + softmax(in[0] * 2.0, -1), -1)}; }};
}
kiln::aot::Program make_bench_aot_transformer_block_test() {
  return zoo_program("transformer_block", kiln::zoo::ZooSize::test);
}
