// The run-time side of an ahead-of-time model (kiln_add_model): the code a generated library
// holds (the graph with its plan, a manifest, a table of region functions linked in statically)
// becomes a compiled graph again, without tracing, lowering or compiling anything. A call checks
// its inputs against what the model was built for in one place (count, dtype, device, rank, every
// static size, every dynamic size against its declared range, sizes that must be equal) and
// gives kiln::Error naming the input, the dim, the value and the rule.
//
//   tiny_mlp::Model m("tiny_mlp.safetensors");   // generated: a kiln::aot::Model over its code
//   Tensor y = m.forward(x);
//   TensorList ys = m.run({x});                   // the untyped entry point
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <HalideRuntime.h>

#include "dsl/tensor.h"
#include "schedules/region.h"

namespace kiln {
class CompiledGraph;
}

namespace kiln::aot {

struct FunctionEntry {
  const char* name;
  RegionFunction function;
};

// What a generated library holds (its <name>.cpp defines one).
struct ModelCode {
  const char* name;
  const char* manifest;
  const char* plan;
  const FunctionEntry* functions;
  size_t function_count;
};

class Model {
 public:
  // Weights from a safetensors file (the one kiln_add_model wrote, or a checkpoint with the same
  // names), or by name; kiln::Error for a missing file, a missing tensor, a wrong dtype or shape.
  Model(const ModelCode& code, const std::string& weights_path);
  Model(const ModelCode& code, const std::map<std::string, Tensor>& weights);
  ~Model();

  // The function's outputs. A training step's model updates its weights in place on each call.
  TensorList run(const TensorList& inputs) const;
  // The raw-buffer entry point, for callers without kiln tensors: host buffers in, and the
  // outputs copied into caller-allocated host buffers of the outputs' shapes and types (kiln::Error
  // naming the buffer otherwise). A CPU model reads the inputs in place; a CUDA model copies them
  // to the device and its outputs back.
  void run_raw(const std::vector<const halide_buffer_t*>& inputs, const std::vector<halide_buffer_t*>& outputs) const;
  // The weights the graph reads, by name (a training step's, as updated so far): views of the
  // tensors it binds, which share memory with those given to the constructor.
  std::map<std::string, Tensor> weights() const;
  const std::string& name() const;
  // "x: f32 [s0, 64] with s0 in 2..512": what run() accepts, one line per input.
  std::string signature() const;

 private:
  // `from` names where the weights came from in errors.
  Model(const ModelCode& code, const std::map<std::string, Tensor>& weights, const std::string& from);

  struct State;
  std::shared_ptr<const State> s_;
};

}  // namespace kiln::aot
