#include "graph/graph_file.h"

#include <cstdio>
#include <sstream>

#include "dsl/error.h"
#include "dsl/profiler.h"
#include "graph/text_records.h"

namespace kiln {

namespace {

constexpr int kVersion = 1;

// "4.0.1": 4 * s0 * s1; "~" first for an opaque dim.
std::string sym_dim(const SymDim& d) {
  std::string out = (d.opaque ? "~" : "") + std::to_string(d.coeff);
  for (int s : d.syms) out += "." + std::to_string(s);
  return out;
}

// The symbolic shape of field k: "[4.0.1,768]".
SymShape sym_shape_of(const TextRecord& f, size_t k) {
  SymShape out;
  for (std::string item : f.items(k)) {
    SymDim d;
    d.opaque = !item.empty() && item[0] == '~';
    if (d.opaque) item.erase(0, 1);
    std::vector<int64_t> parts;
    std::stringstream ss(item);
    for (std::string part; std::getline(ss, part, '.');) parts.push_back(f.integer_of(part));
    f.check(!parts.empty(), "an empty symbolic dim");
    d.coeff = parts[0];
    for (size_t p = 1; p < parts.size(); ++p) d.syms.push_back(int(parts[p]));
    out.push_back(d);
  }
  return out;
}

std::string sym_shape(const SymShape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + sym_dim(s[i]);
  return out + "]";
}

std::string hex_double(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", v);
  return buf;
}

void write_attr(std::ostringstream& os, const std::string& name, const AttrValue& v) {
  os << "attr " << json_quote(name) << ' ';
  if (const auto* i = std::get_if<int64_t>(&v)) os << "i " << *i;
  else if (const auto* d = std::get_if<double>(&v)) os << "d " << hex_double(*d);
  else if (const auto* b = std::get_if<bool>(&v)) os << "b " << int(*b);
  else if (const auto* s = std::get_if<std::string>(&v)) os << "s " << json_quote(*s);
  else os << "v " << record_list(std::get<std::vector<int64_t>>(v));
  os << '\n';
}

InputKind input_kind(const TextRecord& f, const std::string& s) {
  for (InputKind k : {InputKind::argument, InputKind::captured, InputKind::carried, InputKind::tangent, InputKind::saved})
    if (name(k) == s) return k;
  f.fail("unknown input kind '" + s + "'");
}

AttrValue attr_value(const TextRecord& f) {
  const std::string& type = f.str(2);
  if (type == "i") return f.integer(3);
  if (type == "d") return f.real(3);
  if (type == "b") return f.integer(3) != 0;
  if (type == "s") return f.str(3);
  if (type == "v") return f.integers(3);
  f.fail("unknown attribute type '" + type + "'");
}

}  // namespace

std::string write_graph(const Graph& g) {
  std::ostringstream os;
  os << "kiln-graph " << kVersion << '\n';
  for (const Symbol& s : g.shape_env->symbols())
    os << "symbol " << s.hint << ' ' << s.parent << ' ' << int(s.specialized) << ' ' << json_quote(s.source) << ' '
       << json_quote(s.why) << '\n';
  for (const Value& v : g.values)
    os << "value " << name(v.meta.dtype) << ' ' << v.meta.device.str() << ' ' << record_list(v.meta.shape) << ' '
       << sym_shape(v.sym) << ' ' << record_list(v.strides) << ' ' << v.offset << ' ' << v.producer << ' ' << v.output_index
       << '\n';
  for (const GraphInput& in : g.inputs)
    os << "input " << in.value << ' ' << name(in.kind) << ' ' << in.index << ' ' << int(in.requires_grad) << ' '
       << json_quote(in.name) << '\n';
  for (const GraphNode& n : g.nodes) {
    os << "node " << n.op->name << ' ' << int(n.grad_enabled) << ' ' << record_list(n.inputs) << ' ' << record_list(n.outputs) << ' '
       << n.attrs.items().size() << '\n';
    for (const auto& [k, v] : n.attrs.items()) write_attr(os, k, v);
  }
  os << "outputs " << record_list(g.outputs) << '\n';
  for (const auto& [output, input] : g.writes) os << "write " << output << ' ' << input << '\n';
  if (g.joint) os << "joint " << g.joint->forward_outputs << ' ' << record_list(g.joint->grad_inputs) << '\n';
  if (g.backward_traced) os << "backward_traced\n";
  if (g.trains) os << "trains\n";
  os << "end\n";
  return os.str();
}

Graph read_graph(std::string_view text) {
  Graph g;
  std::vector<Symbol> symbols;
  std::istringstream is{std::string(text)};
  std::string line;
  int number = 0;
  bool ended = false;
  while (std::getline(is, line)) {
    TextRecord f(line, ++number, "read_graph");
    if (f.size() == 0) continue;
    f.check(!ended, "text after 'end'");
    const std::string& kind = f.str(0);
    if (number == 1) {
      f.check(kind == "kiln-graph" && f.size() == 2, "not a kiln graph (it starts with 'kiln-graph 1')");
      f.check(f.integer(1) == kVersion, "format version " + f.str(1) + ", this kiln reads " + std::to_string(kVersion));
      continue;
    }
    if (kind == "symbol") {
      f.expect(6);
      Symbol s;
      s.hint = f.integer(1);
      s.parent = int(f.integer(2));
      s.specialized = f.integer(3) != 0;
      s.source = f.str(4);
      s.why = f.str(5);
      symbols.push_back(std::move(s));
    } else if (kind == "value") {
      f.expect(9);
      Value v;
      try {
        v.meta.dtype = dtype_from_name(f.str(1));
        v.meta.device = device_from_name(f.str(2));
      } catch (const Error& e) {
        f.fail(e.what());
      }
      v.meta.shape = f.integers(3);
      v.sym = sym_shape_of(f, 4);
      v.strides = f.integers(5);
      v.offset = f.integer(6);
      v.producer = int(f.integer(7));
      v.output_index = int(f.integer(8));
      f.check(v.sym.size() == v.meta.shape.size() && v.strides.size() == v.meta.shape.size(),
              "a value's shape, symbolic shape and strides differ in rank");
      g.values.push_back(std::move(v));
    } else if (kind == "input") {
      f.expect(6);
      GraphInput in;
      in.value = f.id(1, g.values.size());
      in.kind = input_kind(f, f.str(2));
      in.index = int(f.integer(3));
      in.requires_grad = f.integer(4) != 0;
      in.name = f.str(5);
      g.inputs.push_back(std::move(in));
    } else if (kind == "node") {
      f.expect(6);
      GraphNode n;
      try {
        n.op = &op_def(f.str(1));
      } catch (const Error& e) {
        f.fail(e.what());
      }
      n.grad_enabled = f.integer(2) != 0;
      n.inputs = f.ids(3, g.values.size());
      n.outputs = f.ids(4, g.values.size());
      int64_t attrs = f.integer(5);
      for (int64_t a = 0; a < attrs; ++a) {
        f.check(bool(std::getline(is, line)), "the text ends inside a node's attributes");
        TextRecord af(line, ++number, "read_graph");
        af.expect(4);
        af.check(af.str(0) == "attr", "expected an attribute line");
        n.attrs.set(af.str(1), attr_value(af));
      }
      g.nodes.push_back(std::move(n));
    } else if (kind == "outputs") {
      f.expect(2);
      g.outputs = f.ids(1, g.values.size());
    } else if (kind == "write") {
      f.expect(3);
      g.writes.emplace_back(int(f.integer(1)), int(f.integer(2)));
    } else if (kind == "joint") {
      f.expect(3);
      JointLayout j;
      j.forward_outputs = int(f.integer(1));
      for (int64_t v : f.integers(2)) j.grad_inputs.push_back(int(v));
      g.joint = j;
    } else if (kind == "backward_traced") {
      g.backward_traced = true;
    } else if (kind == "trains") {
      g.trains = true;
    } else if (kind == "end") {
      ended = true;
    } else {
      f.fail("unknown record '" + kind + "'");
    }
  }
  if (!ended) throw_error("read_graph: the text ends before 'end' (", number, " lines)");
  for (const Value& v : g.values)
    for (const SymDim& d : v.sym)
      for (int s : d.syms)
        KILN_CHECK(s >= 0 && size_t(s) < symbols.size(), "read_graph: symbol s", s, " is not declared");
  g.shape_env = std::make_shared<ShapeEnv>(std::move(symbols));
  return g;
}

}  // namespace kiln
