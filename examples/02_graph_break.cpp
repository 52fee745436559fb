// A graph break and its fix. The first forward branches on a tensor's value on the host, so
// compile() captures two graphs and reports the break with its line; the second makes the same
// choice with where() and captures one graph. Both give the eager result.
#include <cstdio>

#include "examples/branchy_model.h"

using namespace kiln;

int main() {
  manual_seed(0);
  examples::BranchyModel model;
  Tensor x = randn({8, 16});

  auto with_break = compile([&](const Tensor& t) { return model.forward_with_break(t); }, {.name = "with_break"});
  auto with_where = compile([&](const Tensor& t) { return model.forward_with_where(t); }, {.name = "with_where"});
  ExplainReport a = explain(with_break, x), b = explain(with_where, x);
  std::printf("%s\n%s\n", a.text().c_str(), b.text().c_str());

  Tensor eager = model.forward_with_break(x);
  double d1 = abs(with_break(x) - eager).max().item<double>();
  double d2 = abs(with_where(x) - eager).max().item<double>();
  std::printf("max |compiled - eager|: with the break %.3g, with where() %.3g\n", d1, d2);
  std::printf("graphs: with the break %d (break at %s), with where() %d\n", a.graph_count,
              a.breaks.empty() ? "-" : a.breaks[0].str().c_str(), b.graph_count);
  return d1 < 1e-5 && d2 < 1e-5 && a.breaks.size() == 1 && b.breaks.empty() ? 0 : 1;
}
