// One training step of a zoo model, as `kiln bench models --train`, `kiln bench gpu` and the demo
// measure it: forward, the model's loss, backward(), AdamW (PyTorch's defaults), zero_grad().
// Eager runs it op by op on the tape; compiled is the whole step under kiln::compile (forward,
// backward and the update in one graph, parameters and optimizer state written back in place).
// Both start from the same parameters.
//
//   TrainStepReport r = measure_train_step("mlp", Device::cpu(), {.backend = "halide"}, host_ms);
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "bench/json.h"
#include "bench/zoo.h"

namespace kiln::bench {

struct TrainStepReport {
  double eager_ms = 0, compiled_ms = 0;
  double compile_s = 0;                 // the compiled step's first call: tracing and compiling
  int64_t saved_bytes_eager = 0;        // what the eager tape keeps for backward (inputs and parameters aside)
  int64_t saved_bytes_compiled = 0;     // what the compiled forward saves (its one tape node)
};

// `step_ms(fn)` runs fn once and returns its time in milliseconds (host clock, or device events).
// Eager and compiled steps alternate after a warm-up; each column is the median of its samples
// (at least 15 each and 2 s in all).
using StepMs = std::function<double(const std::function<void()>&)>;

// Without `eager_column` only the compiled step is timed (eager_ms and saved_bytes_eager stay 0):
// a second variant of the compiled step, such as its CUDA-graph replay, beside a first call's
// eager column.
TrainStepReport measure_train_step(const std::string& model, Device device, CompileOptions options,
                                   const StepMs& step_ms, bool eager_column = true);

// One line: "mlp  train step: eager 1.23 ms, compiled ..., saved for backward: ..."; `digits`
// after the point for milliseconds.
void print_train_step(const std::string& model, const TrainStepReport& r, int digits);
// Sets "<prefix>eager_train_ms", "<prefix>compiled_train_ms", "<prefix>compile_train_s",
// "<prefix>saved_bytes_eager", "<prefix>saved_bytes_compiled" on a model's JSON row.
void set_train_step_json(Json& row, const TrainStepReport& r, const std::string& prefix);

// Runs one AdamW step of `m` on `inputs` and returns the loss (not synchronized). With `autocast`,
// the forward and the loss run under AutocastGuard(device, *autocast), backward and the update
// outside it, as PyTorch's mixed-precision recipe.
Tensor train_step(zoo::ZooModel& m, optim::Optimizer& opt, const TensorList& inputs,
                  std::optional<DType> autocast = std::nullopt);
// The autocast dtype of a benchmark's --precision: none for "tf32" and "f32", bf16 for "bf16",
// f16 for "f16"; kiln::Error for anything else.
std::optional<DType> autocast_of(const std::string& precision);

}  // namespace kiln::bench
