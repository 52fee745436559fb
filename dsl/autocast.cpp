#include "dsl/autocast.h"

#include "dsl/error.h"

namespace kiln {

namespace {

thread_local AutocastStates states;

AutocastState& state_of(Device device) { return device.is_cuda() ? states.cuda : states.cpu; }

// Floating and not f64: the tensors autocast casts (PyTorch leaves f64 alone too).
bool eligible(const Tensor& t) { return is_floating(t.dtype()) && t.dtype() != DType::f64; }

}  // namespace

std::string AutocastStates::str() const {
  std::string s;
  auto add = [&s](const char* device, const AutocastState& a) {
    if (!a.enabled) return;
    s += (s.empty() ? "" : ", ") + std::string(device) + " " + std::string(name(a.dtype));
  };
  add("cpu", cpu);
  add("cuda", cuda);
  return s.empty() ? "off" : s;
}

AutocastState autocast_state(Device device) { return state_of(device); }
AutocastStates autocast_states() { return states; }

std::optional<DType> autocast_dtype(Device device) {
  const AutocastState& a = state_of(device);
  if (!a.enabled) return std::nullopt;
  return a.dtype;
}

AutocastGuard::AutocastGuard(Device device, DType dtype, bool enabled) : device_(device), saved_(state_of(device)) {
  KILN_CHECK(dtype == DType::bf16 || dtype == DType::f16, "AutocastGuard: the lower-precision dtype must be bf16 or "
             "f16, got ", dtype);
  state_of(device) = {enabled, dtype};
}

AutocastGuard::~AutocastGuard() { state_of(device_) = saved_; }

AutocastSuspended::AutocastSuspended() : saved_(states) { states = {}; }
AutocastSuspended::~AutocastSuspended() { states = saved_; }

TensorList autocast_inputs(const OpDef& def, const TensorList& inputs) {
  if (def.autocast == AutocastRule::none || inputs.empty()) return inputs;
  std::optional<DType> lower = autocast_dtype(inputs[0].device());
  if (!lower) return inputs;
  DType to = def.autocast == AutocastRule::f32 ? DType::f32 : *lower;
  TensorList out = inputs;
  for (Tensor& t : out)
    if (eligible(t) && t.dtype() != to) t = t.to(to);
  return out;
}

Tensor autocast_lower(const Tensor& x) {
  std::optional<DType> lower = autocast_dtype(x.device());
  return lower && eligible(x) && x.dtype() != *lower ? x.to(*lower) : x;
}

}  // namespace kiln
