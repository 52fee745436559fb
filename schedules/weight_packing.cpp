#include "schedules/weight_packing.h"

#include "dsl/storage.h"

namespace kiln {

bool packs_weight(const Graph& g, const GraphNode& n) {
  if (n.op->family != KernelFamily::matmul || n.inputs.size() != 2) return false;
  const Value& b = g.values[size_t(n.inputs[1])];
  if (is_contiguous(b.meta.shape, b.strides) || b.meta.shape.size() != 2) return false;
  int v = n.inputs[1];
  while (g.values[size_t(v)].producer >= 0) {
    const GraphNode& p = g.nodes[size_t(g.values[size_t(v)].producer)];
    if (p.op->schedule_class != ScheduleClass::view) return false;
    v = p.inputs[0];
  }
  for (const GraphInput& in : g.inputs)
    if (in.value == v) return in.kind == InputKind::captured;
  return false;
}

Tensor PackedWeight::get(const Tensor& b) const {
  std::lock_guard<std::mutex> lock(mu_);
  const TensorImpl& t = b.impl();
  bool same = storage_.lock() == t.storage && version_ == t.storage->version.load() && shape_ == t.shape &&
              strides_ == t.strides && offset_ == t.offset;
  if (!same) {
    version_ = t.storage->version.load();  // read before the copy: a write during it repacks next time
    packed_ = b.contiguous();
    storage_ = t.storage;
    shape_ = t.shape, strides_ = t.strides, offset_ = t.offset;
  }
  return packed_;
}

}  // namespace kiln
