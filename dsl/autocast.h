// Autocast: mixed precision by op, as PyTorch's torch.autocast. Inside an AutocastGuard for a
// device type, ops on tensors of that device cast their floating inputs by the op's
// OpDef::autocast rule before anything else sees the call: matmul and linear run in the 16-bit
// dtype (f32 accumulation), softmax, log_softmax, layer_norm, cross_entropy, logsumexp, sum, mean
// and var in f32, and pointwise ops promote to their widest input as always. f64 tensors are never
// cast. The casts are ordinary `cast` ops: the tape records them (so gradients arrive in each
// parameter's own dtype) and a trace records them as graph nodes that fusion folds into
// neighbouring pipelines. A compiled function guards on the autocast state it was traced under.
//
//   { AutocastGuard ac(Device::cuda(), bf16); loss = cross_entropy(model.forward(x), y); }
//   loss.backward();   // backward runs outside autocast; its ops follow the forward's dtypes
//
// The state is per thread and per device type (CPU, CUDA), like grad mode.
#pragma once
#include <optional>
#include <string>

#include "dsl/device.h"
#include "dsl/dtype.h"
#include "dsl/op_def.h"
#include "dsl/tensor.h"

namespace kiln {

struct AutocastState {
  bool enabled = false;
  DType dtype = DType::bf16;  // the lower-precision dtype: bf16 or f16

  bool operator==(const AutocastState&) const = default;
};

// The autocast states of both device types: the value a compiled function's guard compares.
struct AutocastStates {
  AutocastState cpu, cuda;

  bool operator==(const AutocastStates&) const = default;
  std::string str() const;  // "off", "cuda bf16", "cpu bf16, cuda f16"
};

AutocastState autocast_state(Device device);
AutocastStates autocast_states();
// The dtype autocast gives lower-precision ops on `device`, if autocast is on there.
std::optional<DType> autocast_dtype(Device device);

// Turns autocast on (or off, enabled = false) for device's type for the guard's lifetime; dtype
// must be bf16 or f16 (kiln::Error otherwise).
class AutocastGuard {
 public:
  AutocastGuard(Device device, DType dtype = DType::bf16, bool enabled = true);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  Device device_;
  AutocastState saved_;
};

// Autocast off on every device type for the guard's lifetime: the backward engine, a trace of
// derivative rules and the run of a recorded graph (whose casts are already nodes) use it.
class AutocastSuspended {
 public:
  AutocastSuspended();
  ~AutocastSuspended();
  AutocastSuspended(const AutocastSuspended&) = delete;
  AutocastSuspended& operator=(const AutocastSuspended&) = delete;

 private:
  AutocastStates saved_;
};

// The inputs of an op call with def.autocast applied (the same list when autocast is off on their
// device or the rule is none). dispatch() calls it first.
TensorList autocast_inputs(const OpDef& def, const TensorList& inputs);
// x cast to the lower-precision dtype of autocast on its device, when autocast is on there and x
// is floating and not f64; else x (composite functions in the lower-precision list: linear,
// scaled_dot_product_attention).
Tensor autocast_lower(const Tensor& x);

}  // namespace kiln
