#include "schedules/region_signature.h"

#include <map>
#include <sstream>

namespace kiln {

namespace {

class Signature {
 public:
  Signature(const Graph& g, const Region& r) : g_(g) {
    os_ << "inputs";
    for (int v : r.inputs) value(v);
    for (int n : r.nodes) {
      const GraphNode& node = g.nodes[size_t(n)];
      os_ << "\n" << node.op->name << "(" << node.attrs.str() << ")";
      for (int v : node.inputs) os_ << " " << local(v);
      os_ << " ->";
      for (int v : node.outputs) value(v);
    }
    list("outputs", r.outputs);
    list("packed", r.packed);
    list("in_place", r.in_place);
    list("recomputed", r.recomputed);
    os_ << "\nsymbols";
    for (int s : r.symbols) os_ << " s" << s;  // the pipeline's parameters, by symbol
  }
  std::string str() const { return os_.str(); }

 private:
  // A value's first appearance: its local id and everything about it the lowering reads.
  void value(int v) {
    int id = local(v);
    const Value& val = g_.values[size_t(v)];
    os_ << " %" << id << ":" << name(val.meta.dtype) << to_string(val.meta.shape) << val.meta.device.str() << "{";
    for (const SymDim& d : val.sym) os_ << g_.shape_env->canonical(d).str() << ",";
    os_ << "}[";
    for (int64_t s : val.strides) os_ << s << ",";
    os_ << "]@" << val.offset;
  }
  int local(int v) {
    auto [it, added] = ids_.emplace(v, int(ids_.size()));
    return it->second;
  }
  void list(const char* what, const std::vector<int>& values) {
    os_ << "\n" << what;
    for (int v : values) os_ << " " << local(v);
  }

  const Graph& g_;
  std::map<int, int> ids_;
  std::ostringstream os_;
};

}  // namespace

std::string region_signature(const Graph& g, const Region& r) { return Signature(g, r).str(); }

std::vector<int> first_with_same_signature(const Graph& g, const std::vector<const Region*>& regions) {
  std::map<std::string, int> first;
  std::vector<int> out;
  for (size_t i = 0; i < regions.size(); ++i)
    out.push_back(first.emplace(region_signature(g, *regions[i]), int(i)).first->second);
  return out;
}

}  // namespace kiln
