// What a model's generator entry gives kiln_add_model: the module whose parameters are the
// model's weights, example inputs with names, and the function to compile ahead of time.
//
//   kiln::aot::Program make_tiny_mlp() {       // kiln_add_model(tiny_mlp ... ENTRY make_tiny_mlp)
//     auto mlp = std::make_shared<kiln::nn::MLP>(std::vector<int64_t>{64, 256, 10});
//     return {mlp, {{"x", kiln::randn({32, 64})}},
//             [mlp](const kiln::TensorList& in) { return kiln::TensorList{mlp->forward(in[0])}; }};
//   }
//
// The examples fix every size and dtype that is not declared dynamic (kiln_add_model's DYNAMIC
// "x:0:2..512": input x, dim 0, sizes 2 to 512).
//
// A training step is a program too: its function computes the loss, calls backward(), the
// optimizer's step() and zero_grad(), and returns the loss; `optimizer` names the optimizer, whose
// state becomes weights of the model ("optimizer.exp_avg.fc1.weight", "optimizer.step"). Each
// call of the AOT model then updates its weights in place, as the compiled step would.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dsl/nn/module.h"
#include "dsl/optim/optimizer.h"
#include "dsl/tensor.h"

namespace kiln::aot {

struct ProgramInput {
  std::string name;  // a C++ identifier: the typed entry point's parameter
  Tensor example;
};

struct Program {
  // Its parameters are the weights (by their named_parameters() names); the function may read no
  // other tensor from its enclosing scope.
  std::shared_ptr<nn::Module> module;
  std::vector<ProgramInput> inputs;
  std::function<TensorList(const TensorList&)> forward;
  std::shared_ptr<optim::Optimizer> optimizer = nullptr;  // a training step's: over module's parameters
};

// The program's weights by the names its model uses: the module's parameters, then the
// optimizer's state named after them. What kiln_add_model saves and aot::Model binds.
std::vector<std::pair<std::string, Tensor>> program_weights(const Program& p);

}  // namespace kiln::aot
