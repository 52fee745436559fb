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
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dsl/nn/module.h"
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
};

}  // namespace kiln::aot
