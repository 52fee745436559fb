// The model zoo: a few small models, by name, that tests and benchmarks run eagerly and through
// kiln::compile, on the CPU or on CUDA. Each comes with its parameters, a maker of fresh random
// inputs and its forward; ZooSize::test shapes run in milliseconds, ZooSize::bench are the
// benchmark's (bench/torch/zoo.py has the same models in PyTorch), ZooSize::real the sizes real
// users run: GPT-2 small at batch 8 x 1024, an MLP and a transformer block over 8192 tokens of
// width 2048 and 1024 (bench/torch/zoo_real.py).
//
//   zoo::ZooModel m = zoo::make_zoo_model("mlp", zoo::ZooSize::test);
//   TensorList y = m.forward(m.make_inputs());   // y[0]: (8, 64)
//
// Models are in eval mode. forward records autograd like any eager call (parameters require
// grad); wrap it in a NoGradGuard to time inference alone.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kiln.h"

namespace kiln::zoo {

enum class ZooSize { test, bench, real };

struct ZooModel {
  std::string name;                                      // "mlp", "transformer_block", ...
  std::string description;                               // one line, with shapes
  std::shared_ptr<nn::Module> module;                    // owns the parameters
  std::function<TensorList()> make_inputs;               // fresh random inputs (global generator)
  std::function<TensorList(const TensorList&)> forward;  // the model's outputs on those inputs
  // The scalar training loss of the outputs (bench/torch/zoo.py's make_loss): cross-entropy
  // against `targets` (drawn once) for tiny_gpt's logits, the mean of the output for the others.
  Tensor targets;
  Tensor loss(const TensorList& outputs) const;
};

// The models of a tier: "mlp", "transformer_block", "norm_softmax", "tiny_gpt" at test and bench
// sizes; "gpt2_small", "mlp", "transformer_block" at real size.
std::vector<std::string> zoo_names(ZooSize size = ZooSize::bench);

// "test", "bench" or "real"; kiln::Error for another name.
ZooSize parse_zoo_size(const std::string& name);
const char* zoo_size_name(ZooSize size);

// The model's forward under kiln::compile, built with its module's named parameters (graphs name
// them, guards check their identity); the function keeps a reference to m.
using ZooFunction = CompiledFunction<std::vector<Tensor>(std::vector<Tensor>)>;
ZooFunction compile_zoo_model(ZooModel& m, CompileOptions options);

// One training step's loss: the model's forward and its loss, for compile() (autograd records it).
using ZooLossFunction = CompiledFunction<Tensor(std::vector<Tensor>)>;
ZooLossFunction compile_zoo_loss(ZooModel& m, CompileOptions options);

// Seconds the first call of a compiled function spent tracing and compiling.
inline double compile_seconds(const CompileStats& s) { return s.trace_s + s.compile_s; }

// Builds a model with parameters drawn from kiln's generator (the same values on every device:
// drawn on the CPU, then moved), its inputs made on `device`; kiln::Error for an unknown name.
ZooModel make_zoo_model(const std::string& name, ZooSize size = ZooSize::bench, Device device = Device::cpu());

}  // namespace kiln::zoo
