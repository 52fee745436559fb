#include "schedules/gpu_math.h"

#include <cmath>

#include "dsl/ops/math_functions.h"

namespace kiln {

using namespace Halide;

namespace {

// Inside GPU loops only (the kernels' code), f32 exp_f32 calls as libdevice's exp2f of x * log2(e),
// scalar or vector. Code left on the host (a loop invariant Halide computes before a launch and
// passes to the kernel, like a constant exp(0)) keeps exp_f32.
class FastExpInKernels : public Internal::IRMutator {
 private:
  using IRMutator::visit;
  int gpu_loops_ = 0;
  Internal::Stmt visit(const Internal::For* op) override {
    using Internal::ForType;
    const bool gpu = op->device_api == DeviceAPI::CUDA || op->for_type == ForType::GPUBlock ||
                     op->for_type == ForType::GPUThread || op->for_type == ForType::GPULane;
    gpu_loops_ += gpu;
    Internal::Stmt s = IRMutator::visit(op);
    gpu_loops_ -= gpu;
    return s;
  }
  Expr visit(const Internal::Call* op) override {
    Expr e = IRMutator::visit(op);
    const auto* c = e.as<Internal::Call>();
    if (gpu_loops_ == 0 || !c || c->call_type != Internal::Call::PureExtern || c->name != "exp_f32" ||
        c->type.element_of() != Float(32))
      return e;
    return Internal::Call::make(c->type, "__nv_exp2f", {c->args[0] * Internal::make_const(c->type, M_LOG2E)},
                                Internal::Call::PureExtern);
  }
};

}  // namespace

Pipeline cuda_pipeline(const std::vector<Func>& outputs) {
  use_libdevice_math(outputs);
  Pipeline p(outputs);
  p.add_custom_lowering_pass(new FastExpInKernels);
  return p;
}

}  // namespace kiln
