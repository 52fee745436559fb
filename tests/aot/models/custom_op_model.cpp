#include "aot/models/custom_op_model.h"

#include <cmath>

#include "dsl/custom_op.h"
#include "kiln.h"

namespace kiln::aot_test {

const OpDef& register_aot_test_ops() {
  static const OpDef& op = register_op({
      .name = "aot_test::softsign_scale",
      .shape = [](const std::vector<TensorMeta>& in, const Attrs&) { return std::vector<TensorMeta>{in[0]}; },
      .cpu =
          [](const TensorList& in, const Attrs& a) {
            KILN_CHECK(in[0].dtype() == DType::f32, "aot_test::softsign_scale: f32 only, got ", name(in[0].dtype()));
            const float scale = float(a.get<double>("scale"));
            Tensor out = Tensor::empty(in[0].shape(), {.dtype = DType::f32});
            const float* x = static_cast<const float*>(in[0].data_ptr());
            float* y = static_cast<float*>(out.data_ptr());
            for (int64_t i = 0; i < in[0].numel(); ++i) y[i] = x[i] / (1.0f + std::fabs(x[i])) * scale;
            return TensorList{out};
          },
      .backward =
          [](const TensorList& in, const TensorList&, const TensorList& grads, const Attrs& a,
             const std::vector<bool>&) {
            Tensor d = 1.0 + abs(in[0]);
            return TensorList{grads[0] * a.get<double>("scale") / (d * d)};
          }});
  return op;
}

}  // namespace kiln::aot_test

kiln::aot::Program make_aot_test_custom_op() {
  using namespace kiln;
  const OpDef& op = aot_test::register_aot_test_ops();
  manual_seed(23);
  auto linear = std::make_shared<nn::Linear>(24, 40);
  linear->eval();
  return {linear,
          {{"x", randn({6, 24})}},
          [linear, &op](const TensorList& in) {
            return TensorList{relu(call_op(op, {linear->forward(in[0])}, {{"scale", 1.5}})[0])};
          }};
}
