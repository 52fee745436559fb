// The eager fused optimizer kernels: AdamW's update of one parameter (adamw_math.h) in one pass
// over the parameter, its gradient and its two moments, written back in place (each element reads
// its own index only). One generator per dtype, so the three results form one Tuple-valued output
// (one loop, one kernel), not three.
#include <Halide.h>

#include "dsl/ops/math_functions.h"
#include "dsl/parallel_grain.h"
#include "dsl/optim/adamw_math.h"

namespace kiln {
namespace {

using namespace Halide;


// A hyperparameter read at run time as a double: arithmetic between hyperparameters stays in
// double (1 - beta2, 1 - lr * weight_decay) and meets a tensor's values in their type, as the
// optimizer's composite ops do with C++ doubles.
struct Coef {
  Expr v;
};
Coef operator-(int k, const Coef& c) { return {cast<double>(k) - c.v}; }
Coef operator*(const Coef& a, const Coef& b) { return {a.v * b.v}; }
Expr operator*(const Expr& x, const Coef& c) { return x * cast(x.type(), c.v); }
Expr operator+(const Expr& x, const Coef& c) { return x + cast(x.type(), c.v); }

template <typename T>
class AdamWKernel : public Generator<AdamWKernel<T>> {
 public:
  template <typename U>
  using Input = typename Generator<AdamWKernel<T>>::template Input<U>;
  template <typename U>
  using Output = typename Generator<AdamWKernel<T>>::template Output<U>;
  template <typename U>
  using GeneratorParam = typename Generator<AdamWKernel<T>>::template GeneratorParam<U>;

  // Given by kiln_eager_kernel to every generator; the dtype is T here.
  GeneratorParam<std::string> op{"op", "adamw"};
  GeneratorParam<std::string> dtype{"dtype", ""};
  Input<Buffer<T>> p{"p", 1}, g{"g", 1}, m{"m", 1}, v{"v", 1};
  Input<Buffer<T>> c1{"c1", 0}, c2{"c2", 0};
  Input<double> lr{"lr"}, beta1{"beta1"}, beta2{"beta2"}, eps{"eps"}, weight_decay{"weight_decay"};
  Output<Func> out{"out", {type_of<T>(), type_of<T>(), type_of<T>()}, 1};

  void generate() {
    Type t = type_of<T>();
    struct {
      Coef lr, beta1, beta2, eps, weight_decay;
    } h{{lr}, {beta1}, {beta2}, {eps}, {weight_decay}};
    Var x("x");
    auto [p1, m1, v1] = optim::adamw_update<Expr>(p(x), g(x), m(x), v(x), c1(), c2(), h);
    out(x) = Tuple(p1, m1, v1);
    if (this->get_target().has_gpu_feature()) {
      use_libdevice_math({out});
      Var bx("bx"), tx("tx");
      out.gpu_tile(x, bx, tx, 256, TailStrategy::GuardWithIf);
    } else {
      Expr n = Func(out).output_buffers()[0].dim(0).extent();
      Var xo("xo"), xi("xi");
      int lanes = this->natural_vector_size(t);
      out.specialize(n >= kParallelMinElements)
          .split(x, xo, xi, lanes * 256, TailStrategy::GuardWithIf)
          .parallel(xo)
          .vectorize(xi, lanes, TailStrategy::GuardWithIf);
      out.vectorize(x, lanes, TailStrategy::GuardWithIf);
    }
  }
};

}  // namespace
}  // namespace kiln

HALIDE_REGISTER_GENERATOR(kiln::AdamWKernel<float>, kiln_adamw_f32)
HALIDE_REGISTER_GENERATOR(kiln::AdamWKernel<double>, kiln_adamw_f64)
