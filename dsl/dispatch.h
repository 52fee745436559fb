// Every op call goes through dispatch(): a stack of modes (like PyTorch's dispatch keys) lets
// higher layers see op calls without dsl/ including them: autograd/ records backward nodes,
// graph/ records graph nodes while tracing. With no mode installed the op runs eagerly.
#pragma once
#include "dsl/attrs.h"
#include "dsl/op_def.h"
#include "dsl/tensor.h"

namespace kiln {

class DispatchMode {
 public:
  virtual ~DispatchMode() = default;
  // Called with this mode removed from the stack, so ops called inside reach the modes below.
  virtual TensorList call(const OpDef& def, const TensorList& inputs, const Attrs& attrs) = 0;
};

// Installs a mode for the guard's lifetime (innermost mode sees calls first).
class DispatchModeGuard {
 public:
  explicit DispatchModeGuard(DispatchMode* mode);
  ~DispatchModeGuard();
  DispatchModeGuard(const DispatchModeGuard&) = delete;
  DispatchModeGuard& operator=(const DispatchModeGuard&) = delete;
};

// Removes every mode for the guard's lifetime (a tracer running the graph it recorded).
class DispatchModesSuspended {
 public:
  DispatchModesSuspended();
  ~DispatchModesSuspended();
  DispatchModesSuspended(const DispatchModesSuspended&) = delete;
  DispatchModesSuspended& operator=(const DispatchModesSuspended&) = delete;

 private:
  std::vector<DispatchMode*> saved_;
};

TensorList dispatch(const OpDef& def, const TensorList& inputs, const Attrs& attrs = {});

// Autograd sits below every mode: after an op ran eagerly and one of its inputs takes part in
// autograd (has autograd metadata), dispatch calls this hook, which autograd/ installs the first
// time a tensor asks for gradients. It may attach backward nodes to the outputs.
using AutogradHook = void (*)(const OpDef& def, const TensorList& inputs, TensorList& outputs,
                              const Attrs& attrs);
void set_autograd_hook(AutogradHook hook);
// The shapes, dtypes and devices of `in`, as shape rules (OpDef::infer) take them.
std::vector<TensorMeta> metas_of(const TensorList& in);
// Runs the op now through its generator-built kernels (or as a view).
TensorList run_eager(const OpDef& def, const TensorList& inputs, const Attrs& attrs);

}  // namespace kiln
