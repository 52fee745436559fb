#include "dsl/dispatch.h"

#include "dsl/autocast.h"
#include "dsl/eager/runners.h"
#include "dsl/error.h"
#include "dsl/kernel_table.h"
#include "dsl/profiler.h"

namespace kiln {

namespace {
thread_local std::vector<DispatchMode*> mode_stack;
AutogradHook autograd_hook = nullptr;

bool any_autograd(const TensorList& inputs) {
  for (const Tensor& t : inputs)
    if (t.impl().autograd) return true;
  return false;
}

// A profiler event's args: "inputs": "f32[64, 128], f32[128]".
std::string input_description(const TensorList& inputs) {
  std::string s;
  for (const Tensor& t : inputs) s += (s.empty() ? "" : ", ") + std::string(name(t.dtype())) + to_string(t.impl().shape);
  return "\"inputs\": " + json_quote(s);
}

// The call after autocast: to the innermost mode, or eagerly (then autograd's hook) when none.
TensorList dispatch_to_modes(const OpDef& def, const TensorList& inputs, const Attrs& attrs) {
  if (mode_stack.empty()) {
    for (const Tensor& t : inputs)
      KILN_CHECK(!t.impl().traced, def.name, ": a tensor of shape ", to_string(t.impl().shape),
                 " was made while tracing a compiled function and is used after its trace ended; values "
                 "inside a compiled function exist only there (return the tensor instead)");
    TensorList out;
    {
      RecordFunction record(def.name, "op", [&] { return input_description(inputs); });
      out = run_eager(def, inputs, attrs);
    }
    if (autograd_hook && any_autograd(inputs)) autograd_hook(def, inputs, out, attrs);
    return out;
  }
  DispatchMode* top = mode_stack.back();
  mode_stack.pop_back();
  struct Restore {
    DispatchMode* m;
    ~Restore() { mode_stack.push_back(m); }
  } restore{top};
  return top->call(def, inputs, attrs);
}

}  // namespace

void set_autograd_hook(AutogradHook hook) { autograd_hook = hook; }

DispatchModeGuard::DispatchModeGuard(DispatchMode* mode) { mode_stack.push_back(mode); }
DispatchModeGuard::~DispatchModeGuard() { mode_stack.pop_back(); }

DispatchModesSuspended::DispatchModesSuspended() { saved_.swap(mode_stack); }
DispatchModesSuspended::~DispatchModesSuspended() { saved_.swap(mode_stack); }

TensorList dispatch(const OpDef& def, const TensorList& inputs, const Attrs& attrs) {
  KILN_CHECK(def.num_inputs < 0 || int(inputs.size()) == def.num_inputs, def.name, ": expected ",
             def.num_inputs, " inputs, got ", inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i)
    KILN_CHECK(inputs[i].defined(), def.name, ": input ", i, " is an undefined tensor");
  // Autocast comes first, so that its casts reach the tape or the trace as ops of their own.
  if (def.autocast != AutocastRule::none && !inputs.empty() && autocast_dtype(inputs[0].device()))
    return dispatch_to_modes(def, autocast_inputs(def, inputs), attrs);
  return dispatch_to_modes(def, inputs, attrs);
}

std::vector<TensorMeta> metas_of(const TensorList& in) {
  std::vector<TensorMeta> m;
  m.reserve(in.size());
  for (const Tensor& t : in) m.push_back({t.shape(), t.dtype(), t.device()});
  return m;
}

TensorList run_eager(const OpDef& def, const TensorList& inputs, const Attrs& attrs) {
  Device device = inputs.empty() ? Device::cpu() : inputs[0].device();
  for (size_t i = 1; i < inputs.size(); ++i)
    KILN_CHECK(inputs[i].device() == device, def.name, ": expected all tensors on one device, got ", device,
               " (input 0) and ", inputs[i].device(), " (input ", i, "); move them with to(Device)");
  KernelDeviceScope scope(device.is_cuda());
  return eager_runner(def.family)(def, inputs, attrs);
}

}  // namespace kiln
