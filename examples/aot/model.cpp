// The model compiled ahead of time: a two-layer GPT over 32 tokens from a vocabulary of 96
// (kiln's nn::TinyGpt), in inference mode. kiln_add_model calls make_example_gpt at build time;
// main.cpp calls it again for the kiln::compile reference.
#include "kiln.h"

kiln::aot::Program make_example_gpt() {
  using namespace kiln;
  manual_seed(2026);
  auto gpt = std::make_shared<nn::TinyGpt>(nn::GptConfig{.vocab = 96, .seq = 32, .width = 64, .heads = 4,
                                                          .layers = 2, .gelu = "tanh"});
  gpt->eval();
  Tensor tokens = randint(0, 96, {4, 32}, {.dtype = DType::i64});
  return {gpt, {{"tokens", tokens}}, [gpt](const TensorList& in) { return TensorList{gpt->forward(in[0])}; }};
}
