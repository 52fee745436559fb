// The models compiled ahead of time: a two-layer GPT over 32 tokens from a vocabulary of 96
// (kiln's nn::TinyGpt), in inference mode (make_example_gpt), and its whole training step with
// AdamW (make_example_gpt_train: forward, cross-entropy against next tokens, backward, update).
// kiln_add_model calls them at build time; check.cpp calls them again for the kiln::compile
// reference.
#include "kiln.h"

namespace {

std::shared_ptr<kiln::nn::TinyGpt> make_gpt() {
  kiln::manual_seed(2026);
  return std::make_shared<kiln::nn::TinyGpt>(
      kiln::nn::GptConfig{.vocab = 96, .seq = 32, .width = 64, .heads = 4, .layers = 2, .gelu = "tanh"});
}

kiln::Tensor random_tokens(int64_t batch) { return kiln::randint(0, 96, {batch, 32}, {.dtype = kiln::DType::i64}); }

}  // namespace

kiln::aot::Program make_example_gpt() {
  using namespace kiln;
  auto gpt = make_gpt();
  gpt->eval();
  return {gpt, {{"tokens", random_tokens(4)}}, [gpt](const TensorList& in) { return TensorList{gpt->forward(in[0])}; }};
}

kiln::aot::Program make_example_gpt_train() {
  using namespace kiln;
  auto gpt = make_gpt();
  auto opt = std::make_shared<optim::AdamW>(gpt->parameters(), optim::AdamWOptions{.lr = 3e-3});
  auto step = [gpt, opt](const TensorList& in) {
    Tensor logits = gpt->forward(in[0]);
    Tensor loss = cross_entropy(logits.reshape({-1, 96}), in[1].reshape({-1}));
    loss.backward();
    opt->step();
    opt->zero_grad();
    return TensorList{loss};
  };
  return {gpt, {{"tokens", random_tokens(4)}, {"targets", random_tokens(4)}}, step, opt};
}
