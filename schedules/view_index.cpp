#include "schedules/view_index.h"

#include <algorithm>
#include <string>

#include "dsl/error.h"
#include "dsl/halide_def.h"
#include "dsl/shape.h"

namespace kiln {

using namespace Halide;

bool dim_is_one(const Graph& g, int v, size_t d) { return g.values[size_t(v)].sym[d] == SymDim::constant(1); }

std::vector<Expr> view_source_index(const Graph& g, const GraphNode& n, const std::vector<Expr>& args,
                                    const std::vector<Expr>& in_shape, const std::vector<Expr>& out_shape) {
  KILN_CHECK(n.op->schedule_class == ScheduleClass::view && n.op->view.index, "compiled view ", n.op->name,
             ": a view op needs an index rule (OpDef::view.index, dsl/ops/views.cpp) to run inside a pipeline");
  int in = n.inputs[0], v = n.outputs[0];
  ViewIndexShapes s;
  s.in = g.values[size_t(in)].meta.shape;
  s.out = g.values[size_t(v)].meta.shape;
  s.in_extent = in_shape;
  s.out_extent = out_shape;
  s.in_dim_is_one = [&g, in](int d) { return dim_is_one(g, in, size_t(d)); };
  s.out_dim_is_one = [&g, v](int d) { return dim_is_one(g, v, size_t(d)); };
  // The element count of dims [begin, end) of value x, as the shape environment's canonical
  // symbolic product; equal for two runs when it is equal for every call.
  auto count = [&g](int x, int begin, int end) {
    SymDim p = SymDim::constant(1);
    for (int d = begin; d < end; ++d) {
      SymDim c = g.shape_env->canonical(g.values[size_t(x)].sym[size_t(d)]);
      if (c.opaque) p.opaque = true;
      p.coeff *= c.coeff;
      p.syms.insert(p.syms.end(), c.syms.begin(), c.syms.end());
    }
    std::sort(p.syms.begin(), p.syms.end());
    return p;
  };
  s.same_count = [&count, in, v](int a0, int a1, int b0, int b1) {
    SymDim a = count(in, a0, a1);
    return !a.opaque && a == count(v, b0, b1);
  };
  // Halide's order (innermost first) to kiln's and back.
  std::vector<Expr> out_index(args.rbegin(), args.rend());
  std::vector<Expr> i = n.op->view.index(out_index, s, n.attrs);
  KILN_CHECK(i.size() == s.in.size(), "compiled view ", n.op->name, ": its index rule gave ", i.size(),
             " indices for an input of rank ", s.in.size());
  return std::vector<Expr>(i.rbegin(), i.rend());
}

}  // namespace kiln
