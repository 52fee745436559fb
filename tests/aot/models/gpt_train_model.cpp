#include "aot/models/gpt_train_model.h"

namespace kiln::test {

std::shared_ptr<nn::TinyGpt> make_aot_test_gpt() {
  manual_seed(2027);
  return std::make_shared<nn::TinyGpt>(
      nn::GptConfig{.vocab = kAotGptVocab, .seq = kAotGptSeq, .width = 64, .heads = 4, .layers = 2, .gelu = "tanh"});
}

std::shared_ptr<optim::SGD> make_aot_test_optimizer(const nn::Module& gpt) {
  return std::make_shared<optim::SGD>(gpt.parameters(), optim::SGDOptions{.lr = 0.05, .momentum = 0.9});
}

std::function<TensorList(const TensorList&)> aot_test_gpt_step(std::shared_ptr<nn::TinyGpt> gpt,
                                                               std::shared_ptr<optim::Optimizer> opt) {
  return [gpt, opt](const TensorList& in) {
    Tensor logits = gpt->forward(in[0]);
    Tensor loss = cross_entropy(logits.reshape({-1, kAotGptVocab}), in[1].reshape({-1}));
    loss.backward();
    opt->step();
    opt->zero_grad();
    return TensorList{loss};
  };
}

}  // namespace kiln::test

// kiln_add_model's entry (ENTRY make_aot_test_gpt_train).
kiln::aot::Program make_aot_test_gpt_train() {
  using namespace kiln;
  auto gpt = test::make_aot_test_gpt();
  auto opt = test::make_aot_test_optimizer(*gpt);
  Tensor tokens = randint(0, test::kAotGptVocab, {4, test::kAotGptSeq}, {.dtype = DType::i64});
  Tensor targets = randint(0, test::kAotGptVocab, {4, test::kAotGptSeq}, {.dtype = DType::i64});
  return {gpt, {{"tokens", tokens}, {"targets", targets}}, test::aot_test_gpt_step(gpt, opt), opt};
}
