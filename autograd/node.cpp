#include "autograd/node.h"

#include "autograd/derivatives.h"
#include "dsl/error.h"

namespace kiln {

std::string Node::name() const {
  if (!custom_name.empty()) return custom_name;
  std::string n = op->name;
  bool up = true;
  std::string out;
  for (char c : n) {
    if (c == '_') { up = true; continue; }
    out += up ? char(std::toupper(static_cast<unsigned char>(c))) : c;
    up = false;
  }
  return out + "Backward";
}

TensorList Node::apply(const TensorList& grad_outputs) const {
  KILN_CHECK(!released, "backward: the graph through ", name(), " was already freed by a previous "
             "backward; call backward(gradient, /*retain_graph=*/true) the first time to go through it twice");
  TensorList in, out;
  for (const auto* list : {&inputs, &outputs}) {
    for (size_t i = 0; i < list->size(); ++i) {
      const SavedTensor& s = (*list)[i];
      KILN_CHECK(s.value.storage()->version.load() == s.version, "backward: a tensor saved by ", name(),
                 " (", list == &inputs ? "input " : "output ", i, ", shape ", to_string(s.value.shape()),
                 ") was modified in place after it was saved (version ", s.version, " -> ",
                 s.value.storage()->version.load(), ")");
    }
  }
  for (const SavedTensor& s : inputs) in.push_back(s.value);
  for (const SavedTensor& s : outputs) out.push_back(s.value);
  if (custom) return custom(in, grad_outputs);
  std::vector<bool> needed(in.size());
  for (size_t i = 0; i < in.size(); ++i) needed[i] = i < next.size() && next[i].defined();
  TensorList grads = derivative_rule(*op)(in, out, grad_outputs, attrs, needed);
  grads.resize(in.size());
  for (size_t i = 0; i < grads.size(); ++i) {
    if (!grads[i].defined() || !next[i].defined()) continue;
    KILN_CHECK(grads[i].shape() == in[i].shape(), "backward: ", name(), " produced a gradient of shape ",
               to_string(grads[i].shape()), " for input ", i, " of shape ", to_string(in[i].shape()));
    if (grads[i].dtype() != in[i].dtype()) grads[i] = grads[i].to(in[i].dtype());
  }
  return grads;
}

void Node::release() {
  inputs.clear();
  outputs.clear();
  released = true;
}

Edge edge_of(const Tensor& t) {
  const auto& meta = t.impl().autograd;
  if (!meta) return {};
  if (meta->grad_fn) return {meta->grad_fn, meta->output_nr, nullptr};
  if (meta->requires_grad) return {nullptr, 0, t.impl_ptr()};
  return {};
}

}  // namespace kiln
