// The training step tests/CMakeLists.txt compiles ahead of time for CUDA (model aot_gpt_train_cuda,
// from gpt_train_model.cpp): a two-layer GPT's forward, cross-entropy against next tokens,
// backward and SGD update with momentum. tests/cuda/test_aot_model.cpp builds the same step on the
// GPU as its reference. (Not AdamW: it scales each gradient by its own running magnitude, so a
// gradient that is zero up to rounding, as the attention key bias's is, takes full-size steps in
// a direction rounding decides, and two correct runs part.)
#pragma once
#include <memory>

#include "aot/program.h"
#include "kiln.h"

namespace kiln::test {

inline constexpr int64_t kAotGptVocab = 96, kAotGptSeq = 32;

// The GPT with the weights the generator saw (a fixed seed).
std::shared_ptr<nn::TinyGpt> make_aot_test_gpt();
std::shared_ptr<optim::SGD> make_aot_test_optimizer(const nn::Module& gpt);
// The training step over tokens and targets ([batch, 32] i64), returning the loss.
std::function<TensorList(const TensorList&)> aot_test_gpt_step(std::shared_ptr<nn::TinyGpt> gpt,
                                                               std::shared_ptr<optim::Optimizer> opt);

}  // namespace kiln::test
