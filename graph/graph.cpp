#include "graph/graph.h"

#include <algorithm>
#include <bit>
#include <sstream>
#include <variant>

#include "autograd/derivatives.h"
#include "dsl/error.h"

namespace kiln {

namespace {

uint64_t mix(uint64_t h, uint64_t v) {  // FNV-1a over 64-bit words
  return (h ^ v) * 0x100000001b3ull;
}
uint64_t mix(uint64_t h, std::string_view s) {
  for (unsigned char c : s) h = mix(h, c);
  return mix(h, 0xffu);
}

uint64_t mix(uint64_t h, const Attrs& a) {  // exact: doubles by their bits
  for (const auto& [k, v] : a.items()) {
    h = mix(h, k);
    h = mix(h, uint64_t(v.index()));
    std::visit([&](const auto& x) {
      using T = std::decay_t<decltype(x)>;
      if constexpr (std::is_same_v<T, double>) h = mix(h, std::bit_cast<uint64_t>(x));
      else if constexpr (std::is_same_v<T, std::string>) h = mix(h, std::string_view(x));
      else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
        h = mix(h, uint64_t(x.size()));
        for (int64_t e : x) h = mix(h, uint64_t(e));
      } else h = mix(h, uint64_t(x));
    }, v);
  }
  return h;
}

std::string id(const char* prefix, int v) {  // "%3", "n3" (appends: g++ 12 warns on "lit" + string)
  std::string out(prefix);
  out += std::to_string(v);
  return out;
}
std::string value_name(int v) { return id("%", v); }

std::string attr_text(const Attrs& a, bool after_inputs) {
  return a.items().empty() ? "" : (after_inputs ? ", " : "") + a.str();
}

}  // namespace

std::string_view name(InputKind k) {
  switch (k) {
    case InputKind::argument: return "argument";
    case InputKind::captured: return "captured";
    case InputKind::carried: return "carried";
    case InputKind::tangent: return "tangent";
    case InputKind::saved: return "saved";
  }
  return "?";
}

std::vector<std::vector<int>> readers_of(const Graph& g) {
  std::vector<std::vector<int>> readers(g.values.size());
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (int v : g.nodes[i].inputs) readers[size_t(v)].push_back(int(i));
  return readers;
}

std::vector<int> view_chain(const Graph& g, int v) {
  std::vector<int> chain;
  while (g.values[size_t(v)].producer >= 0) {
    const GraphNode& n = g.nodes[size_t(g.values[size_t(v)].producer)];
    if (n.op->schedule_class != ScheduleClass::view) break;
    chain.insert(chain.begin(), g.values[size_t(v)].producer);
    v = n.inputs[0];
  }
  return chain;
}

bool graph_keeps_outputs(const Graph& g) { return !g.trains && g.writes.empty(); }

int view_base(const Graph& g, int v) {
  std::vector<int> chain = view_chain(g, v);
  return chain.empty() ? v : g.nodes[size_t(chain.front())].inputs[0];
}

bool transposes_flattened(const Graph& g, int base, int a) {
  const Value &b = g.values[size_t(base)], &v = g.values[size_t(a)];
  const Shape& s = b.meta.shape;
  if (s.size() < 2 || b.strides != contiguous_strides(s) || v.offset != b.offset) return false;
  return v.meta.shape == Shape{s.back(), numel(s) / s.back()} && v.strides == Strides{1, s.back()};
}

std::string value_type_str(const Value& v) {
  std::string out(name(v.meta.dtype));
  out += to_string(v.sym);
  if (!v.meta.device.is_cpu()) out.append("@").append(v.meta.device.str());
  return out;
}

int Graph::add_input(InputKind kind, int index, std::string nm, const TensorMeta& meta, const SymShape& sym,
                     const Strides& strides, int64_t offset, bool requires_grad) {
  values.push_back({meta, sym, strides, offset, -1, 0});
  inputs.push_back({int(values.size()) - 1, kind, index, std::move(nm), requires_grad});
  return int(values.size()) - 1;
}

std::vector<int> Graph::add_node(const OpDef& op, const Attrs& attrs, const std::vector<int>& ins,
                                 std::vector<Value> outs) {
  GraphNode n{&op, attrs, ins, {}};
  for (int v : ins) KILN_CHECK(v >= 0 && v < int(values.size()), "graph: ", op.name, " reads unknown value ", v);
  for (size_t k = 0; k < outs.size(); ++k) {
    outs[k].producer = int(nodes.size());
    outs[k].output_index = int(k);
    values.push_back(std::move(outs[k]));
    n.outputs.push_back(int(values.size()) - 1);
  }
  nodes.push_back(std::move(n));
  return nodes.back().outputs;
}

std::vector<int> Graph::add_inferred_node(const OpDef& op, const Attrs& attrs, const std::vector<int>& ins) {
  std::vector<TensorMeta> metas;
  std::vector<SymShape> syms;
  for (int v : ins) {
    metas.push_back(values[size_t(v)].meta);
    syms.push_back(values[size_t(v)].sym);
  }
  std::vector<SymShape> out_syms;
  std::vector<TensorMeta> out = shape_env->infer(op, metas, syms, attrs, out_syms);
  std::vector<Value> outs;
  for (size_t k = 0; k < out.size(); ++k) {
    outs.push_back({out[k], out_syms[k], contiguous_strides(out[k].shape), 0, -1, 0});
    if (op.schedule_class == ScheduleClass::view) {
      const Value& x = values[size_t(ins[0])];
      ViewMeta v = op.view.layout({x.meta.shape, x.strides, x.offset}, attrs);
      outs.back().strides = v.strides;
      outs.back().offset = v.offset;
    }
  }
  return add_node(op, attrs, ins, std::move(outs));
}

GraphRewrite::GraphRewrite(const Graph& g) : g_(g), id_(g.values.size(), -1) {
  out.shape_env = g.shape_env;
  out.joint = g.joint;
  out.backward_traced = g.backward_traced;
  out.trains = g.trains;
  out.writes = g.writes;
  for (const GraphInput& in : g.inputs) {
    const Value& v = g.values[size_t(in.value)];
    id_[size_t(in.value)] = out.add_input(in.kind, in.index, in.name, v.meta, v.sym, v.strides, v.offset, in.requires_grad);
  }
}

std::vector<int> GraphRewrite::ids(const std::vector<int>& old_values) const {
  std::vector<int> out_ids;
  for (int v : old_values) out_ids.push_back(id(v));
  return out_ids;
}

void GraphRewrite::copy(const GraphNode& node) {
  std::vector<Value> outs;
  for (int v : node.outputs) outs.push_back(g_.values[size_t(v)]);
  std::vector<int> made = out.add_node(*node.op, node.attrs, ids(node.inputs), std::move(outs));
  out.nodes.back().grad_enabled = node.grad_enabled;
  for (size_t k = 0; k < made.size(); ++k) set(node.outputs[k], made[k]);
}

void GraphRewrite::replace(const GraphNode& node, size_t first_new, const std::vector<int>& values,
                           std::string_view pass) {
  for (size_t k = first_new; k < out.nodes.size(); ++k) out.nodes[k].grad_enabled = node.grad_enabled;
  KILN_CHECK(values.size() == node.outputs.size(), pass, ": ", node.op->name, " gave ", values.size(),
             " outputs, expected ", node.outputs.size());
  for (size_t o = 0; o < values.size(); ++o) {
    const TensorMeta &got = out.values[size_t(values[o])].meta, &want = g_.values[size_t(node.outputs[o])].meta;
    KILN_CHECK(got.shape == want.shape && got.dtype == want.dtype, pass, ": ", node.op->name, " output ", o, " gave ",
               to_string(got.shape), " ", got.dtype, ", expected ", to_string(want.shape), " ", want.dtype);
    set(node.outputs[o], values[o]);
  }
}

Graph GraphRewrite::finish() && {
  out.outputs = ids(g_.outputs);
  return std::move(out);
}

bool Graph::on_cuda() const {
  return std::any_of(values.begin(), values.end(), [](const Value& v) { return v.meta.device.is_cuda(); });
}

void move_graph_to(Graph& g, Device d) {
  for (Value& v : g.values) v.meta.device = d;
  for (GraphNode& n : g.nodes)
    if (n.attrs.has("device")) n.attrs.set("device", d.str());
}

bool Graph::needs_autograd() const {
  if (backward_traced) return false;
  bool input = false, op = false;
  for (const GraphInput& in : inputs) input = input || in.requires_grad;
  for (const GraphNode& n : nodes) op = op || n.grad_enabled;
  return input && op;
}

std::vector<bool> Graph::grad_carrying_values() const {
  std::vector<bool> carries(values.size(), false);
  for (const GraphInput& in : inputs) carries[size_t(in.value)] = in.requires_grad;
  for (const GraphNode& n : nodes) {
    if (!n.grad_enabled || !is_differentiable(*n.op)) continue;
    bool any = false;
    for (int v : n.inputs) any = any || carries[size_t(v)];
    for (int v : n.outputs) carries[size_t(v)] = any && is_floating(values[size_t(v)].meta.dtype);
  }
  return carries;
}

int Graph::forward_input_count() const {
  int n = 0;
  while (n < int(inputs.size()) && inputs[size_t(n)].kind != InputKind::tangent) ++n;
  return n;
}

uint64_t Graph::structural_hash() const {
  uint64_t h = 0xcbf29ce484222325ull;
  // Values are hashed by position in the order they are defined, so ids must be comparable:
  // renumber them as inputs then node outputs appear.
  std::vector<int64_t> order(values.size(), -1);
  int64_t next = 0;
  auto hash_value = [&](int v) {
    const Value& x = values[v];
    order[v] = next++;
    h = mix(h, uint64_t(x.meta.dtype));
    h = mix(h, x.meta.device.str());
    h = mix(h, to_string(shape_env->canonical(x.sym)));
    for (size_t d = 0; d < x.strides.size(); ++d)  // layout matters where the size is not 1
      if (x.meta.shape[d] != 1) h = mix(h, uint64_t(x.strides[d]));
    h = mix(h, uint64_t(x.offset));
  };
  for (const GraphInput& in : inputs) {
    h = mix(h, uint64_t(in.kind));
    h = mix(h, uint64_t(in.index));
    h = mix(h, uint64_t(in.requires_grad));
    hash_value(in.value);
  }
  for (const GraphNode& n : nodes) {
    h = mix(h, n.op->name);
    h = mix(h, n.attrs);
    h = mix(h, uint64_t(n.grad_enabled));
    for (int v : n.inputs) h = mix(h, uint64_t(order[v]));
    for (int v : n.outputs) hash_value(v);
  }
  for (int v : outputs) h = mix(h, uint64_t(order[v]));
  h = mix(h, uint64_t(backward_traced));
  h = mix(h, uint64_t(trains));
  if (joint) {
    h = mix(h, uint64_t(joint->forward_outputs));
    for (int i : joint->grad_inputs) h = mix(h, uint64_t(i));
  }
  return h;
}

std::string node_text(const Graph& g, const GraphNode& n) {
  std::ostringstream os;
  for (size_t k = 0; k < n.outputs.size(); ++k)
    os << (k ? ", " : "") << value_name(n.outputs[k]) << ": " << value_type_str(g.values[size_t(n.outputs[k])]);
  os << " = " << n.op->name << '(';
  for (size_t i = 0; i < n.inputs.size(); ++i) os << (i ? ", " : "") << value_name(n.inputs[i]);
  os << attr_text(n.attrs, !n.inputs.empty()) << ")" << (n.grad_enabled ? "" : "  # no grad");
  return os.str();
}

std::string Graph::text() const {
  std::ostringstream os;
  os << "graph(" << inputs.size() << " inputs, " << nodes.size() << " ops, " << outputs.size() << " outputs)\n";
  for (const GraphInput& in : inputs)
    os << "  " << value_name(in.value) << ": " << value_type_str(values[in.value]) << " = input " << name(in.kind)
       << ' ' << in.index << " \"" << in.name << "\"" << (in.requires_grad ? " requires_grad" : "") << '\n';
  for (const GraphNode& n : nodes) os << "  " << node_text(*this, n) << '\n';
  os << "  return (";
  for (size_t i = 0; i < outputs.size(); ++i) os << (i ? ", " : "") << value_name(outputs[i]);
  os << ")\n";
  for (int s = 0; s < shape_env->symbol_count(); ++s) {
    const Symbol& sym = shape_env->symbol(s);
    int r = shape_env->root(s);
    os << "  # s" << s << ": " << sym.source << ", hint " << sym.hint;
    if (r != s) os << ", equal to s" << r;
    if (sym.specialized) os << ", specialized";
    if (!sym.why.empty()) os << " (" << sym.why << ")";
    os << '\n';
  }
  return os.str();
}

std::string Graph::dot() const {
  std::ostringstream os;
  os << "digraph kiln {\n  rankdir=TB;\n  node [fontname=\"monospace\", fontsize=10];\n";
  for (const GraphInput& in : inputs)
    os << "  v" << in.value << " [shape=box, style=rounded, label=\"" << in.name << "\\n"
       << value_type_str(values[in.value]) << "\"];\n";
  for (size_t i = 0; i < nodes.size(); ++i) {
    const GraphNode& n = nodes[i];
    os << "  n" << i << " [shape=box, label=\"" << n.op->name << "\\n";
    for (int v : n.outputs) os << value_type_str(values[v]) << "\\n";
    os << "\"];\n";
    for (int v : n.inputs) {
      const Value& x = values[v];
      os << "  " << (x.producer < 0 ? id("v", v) : id("n", x.producer)) << " -> n" << i
         << ";\n";
    }
  }
  for (size_t k = 0; k < outputs.size(); ++k) {
    const Value& x = values[outputs[k]];
    os << "  out" << k << " [shape=plaintext, label=\"output " << k << "\"];\n  "
       << (x.producer < 0 ? id("v", outputs[k]) : id("n", x.producer)) << " -> out" << k
       << ";\n";
  }
  os << "}\n";
  return os.str();
}

}  // namespace kiln
