#include "schedules/kept_outputs.h"

#include <algorithm>
#include <atomic>

namespace kiln {

namespace {
std::atomic<int64_t> reused{0};
}  // namespace

bool graph_keeps_outputs(const Graph& g) { return !g.trains && g.writes.empty(); }

bool keeps_outputs(const Graph& g, const Region& r, const std::map<int, std::vector<int>>& in_place,
                   const std::map<int, int>& over) {
  if (!graph_keeps_outputs(g) || r.inputs.empty() || r.outputs.empty()) return false;
  for (int v : r.inputs) {
    auto in = std::find_if(g.inputs.begin(), g.inputs.end(), [&](const GraphInput& i) { return i.value == v; });
    if (in == g.inputs.end() || in->kind != InputKind::captured) return false;
  }
  for (int v : r.outputs)
    if (in_place.count(v) || over.count(v) || std::find(g.outputs.begin(), g.outputs.end(), v) != g.outputs.end())
      return false;
  return true;
}

std::vector<uint64_t> KeptOutputs::versions(const std::vector<Tensor>& inputs) {
  std::vector<uint64_t> out;
  for (const Tensor& t : inputs) out.push_back(t.impl().storage->version.load());
  return out;
}

std::vector<Tensor> KeptOutputs::get(const std::vector<Tensor>& inputs) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (outputs_.empty() || sources_.size() != inputs.size()) return {};
  for (size_t k = 0; k < inputs.size(); ++k) {
    const TensorImpl& t = inputs[k].impl();
    const Source& s = sources_[k];
    if (s.storage.lock() != t.storage || s.version != t.storage->version.load() || s.shape != t.shape ||
        s.strides != t.strides || s.offset != t.offset)
      return {};
  }
  ++reused;
  return outputs_;
}

void KeptOutputs::put(const std::vector<Tensor>& inputs, const std::vector<uint64_t>& versions,
                      std::vector<Tensor> outputs) {
  std::lock_guard<std::mutex> lock(mu_);
  sources_.clear();
  for (size_t k = 0; k < inputs.size(); ++k) {
    const TensorImpl& t = inputs[k].impl();
    sources_.push_back({t.storage, versions[k], t.shape, t.strides, t.offset});
  }
  outputs_ = std::move(outputs);
}

int64_t kept_outputs_reused() { return reused.load(); }

}  // namespace kiln
