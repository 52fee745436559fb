#include "schedules/weight_packing.h"

#include "dsl/error.h"
#include "dsl/storage.h"

namespace kiln {

namespace {

Tensor pack_panels(const Tensor& b) {
  KILN_CHECK(b.dtype() == f32 && b.dim() == 2, "halide backend: panel packing takes a 2-D f32 weight, got ",
             b.dtype(), to_string(b.shape()));
  int64_t k_size = b.size(0), n_size = b.size(1);
  Shape shape = panel_shape(b.shape());
  int64_t panels = shape[0];
  Tensor out = Tensor::empty(shape, {f32, Device::cpu()});
  const float* src = static_cast<const float*>(b.data_ptr());
  float* dst = static_cast<float*>(out.data_ptr());
  int64_t sk = b.stride(0), sn = b.stride(1);
  for (int64_t p = 0; p < panels; ++p)
    for (int64_t k = 0; k < k_size; ++k)
      for (int64_t j = 0; j < kGemmPanel; ++j) {
        int64_t n = p * kGemmPanel + j;
        *dst++ = n < n_size ? src[k * sk + n * sn] : 0.0f;
      }
  return out;
}

}  // namespace

bool packs_weight(const Graph& g, const GraphNode& n) {
  if (!n.op->gemm || n.inputs.size() != 2 || g.trains) return false;
  const Value& b = g.values[size_t(n.inputs[1])];
  if (!b.meta.device.is_cpu()) return false;  // cuBLAS reads transposed weights as they are
  if (is_contiguous(b.meta.shape, b.strides) || b.meta.shape.size() != 2) return false;
  int v = view_base(g, n.inputs[1]);
  for (const GraphInput& in : g.inputs)
    if (in.value == v) return in.kind == InputKind::captured;
  return false;
}

Tensor PackedWeight::get(const Tensor& b) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!source_.matches(b)) {
    source_ = TensorStamp::of(b);  // taken before the copy: a write during it repacks next time
    packed_ = layout_ == Layout::panels ? pack_panels(b) : b.contiguous();
  }
  return packed_;
}

}  // namespace kiln
