// Saving and loading a module's parameters in the safetensors format (an 8-byte little-endian
// header length, a JSON header naming each tensor's dtype, shape and byte range, then the raw
// data), so checkpoints open in other tools. Saving is atomic (temporary file, then rename);
// loading checks every name, dtype, shape and byte range before it changes any parameter.
//
//   nn::save_state_dict(model, "model.safetensors");
//   nn::load_state_dict(other, "model.safetensors");
#pragma once
#include <string>

#include "dsl/nn/module.h"

namespace kiln::nn {

void save_state_dict(const Module& m, const std::string& path);
// Named tensors of any device in the same format (gradients, activations), atomically:
//   nn::save_safetensors({{"w.grad", w.grad()}}, "grads.safetensors");
void save_safetensors(const std::vector<std::pair<std::string, Tensor>>& named, const std::string& path);
void load_state_dict(Module& m, const std::string& path);
// Every tensor of a safetensors file, on the CPU, in name order; kiln::Error naming the file and
// the tensor for a dtype kiln lacks or a byte range outside the data.
std::vector<std::pair<std::string, Tensor>> load_safetensors(const std::string& path);

}  // namespace kiln::nn
