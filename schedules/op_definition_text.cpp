#include "schedules/op_definition_text.h"

#include <cctype>
#include <map>
#include <set>
#include <sstream>
#include <utility>

#include "dsl/halide_def.h"
#include "schedules/lower_region.h"

namespace kiln {

using namespace Halide;

namespace {

bool name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$' || c == '.'; }

// Whether a word of the text is a name Halide generated (a letter and a counter, or anything with
// a '$' in it), which differs between processes.
bool generated(const std::string& w) {
  if (w.find('$') != std::string::npos) return true;
  if (w.size() < 2 || !std::isalpha(static_cast<unsigned char>(w[0]))) return false;
  for (size_t i = 1; i < w.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(w[i]))) return false;
  return true;
}

// `text` cut into its words (runs of name characters) and what lies between them, in order:
// {piece, whether it is a word}. The pieces joined give the text back.
std::vector<std::pair<std::string, bool>> pieces(const std::string& text) {
  std::vector<std::pair<std::string, bool>> out;
  for (size_t i = 0; i < text.size();) {
    const bool word = name_char(text[i]);
    size_t j = i;
    while (j < text.size() && name_char(text[j]) == word) ++j;
    out.emplace_back(text.substr(i, j - i), word);
    i = j;
  }
  return out;
}

std::string joined(const std::vector<Expr>& es) {
  std::ostringstream os;
  for (size_t i = 0; i < es.size(); ++i) os << (i ? ", " : "") << es[i];
  return os.str();
}

// One Function's definitions: pure, then each update with its reduction domain.
std::string function_text(const Internal::Function& f) {
  std::ostringstream os;
  std::vector<Expr> args;
  for (const std::string& a : f.args()) args.push_back(Internal::Variable::make(Int(32), a));
  if (f.has_pure_definition()) os << f.name() << "(" << joined(args) << ") = " << joined(f.values()) << "\n";
  for (const Internal::Definition& u : f.updates()) {
    os << "  over";
    for (const Internal::ReductionVariable& r : u.schedule().rvars()) os << " " << r.var << "[" << r.min << ", " << r.extent << "]";
    if (u.predicate().defined()) os << " where " << u.predicate();
    os << "\n  " << f.name() << "(" << joined(u.args()) << ") = " << joined(u.values()) << "\n";
  }
  return os.str();
}

// Generated names replaced by n0, n1, ... in the order they first appear.
std::string canonical(const std::string& text) {
  std::map<std::string, std::string> rename;
  std::string out;
  for (auto [piece, word] : pieces(text)) {
    if (word && generated(piece)) {
      auto [it, fresh] = rename.emplace(piece, "");
      if (fresh) it->second = "n" + std::to_string(rename.size() - 1);
      piece = it->second;
    }
    out += piece;
  }
  return out;
}

std::string tensors_text(const GraphNode& n, const Graph& g) {
  std::vector<HalideTensor> in;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    const Value& v = g.values[size_t(n.inputs[i])];
    int rank = int(v.meta.shape.size());
    ImageParam p(halide_type(widened(v.meta.dtype)), rank, "in" + std::to_string(i));
    std::vector<Var> vars = halide_vars(rank);
    Func f("in" + std::to_string(i) + "_func");
    f(vars) = p(vars);
    HalideTensor t{f, {}, widened(v.meta.dtype)};
    for (int d = rank - 1; d >= 0; --d) t.shape.push_back(p.dim(d).extent());
    in.push_back(t);
  }
  Func out = n.op->define(in, n.attrs).at(0).func;
  // Every Function it calls, each once, in the order the definitions name them.
  std::map<std::string, Internal::Function> env = Internal::find_transitive_calls(out.function());
  std::set<std::string> done{out.name()};
  std::vector<Internal::Function> todo{out.function()};
  std::string text;
  for (size_t k = 0; k < todo.size(); ++k) {
    std::string t = function_text(todo[k]);
    text += t;
    for (const auto& [piece, word] : pieces(t))
      if (auto f = env.find(piece); word && f != env.end() && done.insert(piece).second) todo.push_back(f->second);
  }
  return canonical(text);
}

}  // namespace

std::string op_definition_text(const GraphNode& n, const Graph& g) {
  if (n.op->define) return tensors_text(n, g);
  std::vector<Expr> in;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    DType t = widened(g.values[size_t(n.inputs[i])].meta.dtype);
    in.push_back(Internal::Variable::make(halide_type(t), "in" + std::to_string(i)));
  }
  std::ostringstream os;
  os << n.op->pointwise(in, n.attrs);
  return os.str();
}

}  // namespace kiln
