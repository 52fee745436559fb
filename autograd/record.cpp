#include "autograd/record.h"

#include <mutex>

#include "autograd/derivatives.h"
#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "dsl/dispatch.h"

namespace kiln {

namespace {

SavedTensor save(const Tensor& t) { return {t.alias(), t.storage()->version.load()}; }

void record(const OpDef& def, const TensorList& inputs, TensorList& outputs, const Attrs& attrs) {
  if (!grad_enabled() || !is_differentiable(def)) return;
  auto node = std::make_shared<Node>();
  bool any = false;
  for (const Tensor& t : inputs) {
    node->next.push_back(edge_of(t));
    any |= node->next.back().defined();
  }
  if (!any) return;
  node->op = &def;
  node->attrs = attrs;
  for (const Tensor& t : inputs) node->inputs.push_back(save(t));
  for (Tensor& out : outputs) {
    for (const Tensor& in : inputs)
      if (out.impl_ptr() == in.impl_ptr()) out = out.alias();  // an op that returned its input
    node->outputs.push_back(save(out));
  }
  for (size_t k = 0; k < outputs.size(); ++k) {
    if (!is_floating(outputs[k].dtype())) continue;
    auto meta = std::make_shared<AutogradMeta>();
    meta->grad_fn = node;
    meta->output_nr = int(k);
    outputs[k].impl().autograd = meta;
  }
}

}  // namespace

void install_autograd() {
  static std::once_flag once;
  std::call_once(once, [] { set_autograd_hook(&record); });
}

}  // namespace kiln
