// The eager kernel of arange and linspace on CUDA (dsl/ops/ranges.h: out(i) = start + i * step,
// the last element exactly `last`), with the range's parameters as arguments so one kernel serves
// every range. On the CPU these ops are host loops (dsl/eager/creation.cpp); on CUDA a kernel
// fills the tensor where it lives, with no host copy.
#include "dsl/halide_def.h"
#include "dsl/ops/ranges.h"
#include "generators/kernel_params.h"

namespace kiln {
namespace {

using namespace Halide;

class IotaKernel : public Generator<IotaKernel> {
 public:
  GeneratorParam<std::string> op{"op", "arange"};
  GeneratorParam<std::string> dtype{"dtype", "f32"};
  GeneratorParam<std::string> attrs{"attrs", ""};
  Input<double> start{"start"};
  Input<double> step{"step"};
  Input<double> last{"last"};
  Input<int32_t> count{"count"};  // the output's length

  void configure() { out_ = add_output<Buffer<>>("out", halide_type(dtype_from_name(dtype.value())), 1); }

  void generate() {
    Var i("i");
    Expr v = range_element(start, step, last, i, count);
    Func out = *out_;
    out(i) = store_value(v, dtype_from_name(dtype.value()));
    if (get_target().has_gpu_feature()) {
      Var bx("bx"), tx("tx");
      out.gpu_tile(i, bx, tx, 256, TailStrategy::GuardWithIf);
    }
  }

 private:
  GeneratorOutput<Buffer<>>* out_ = nullptr;
};

}  // namespace
}  // namespace kiln

HALIDE_REGISTER_GENERATOR(kiln::IotaKernel, kiln_iota)
