// The story of examples/04_dynamic_shapes.cpp (also `kiln explain dynamic_shapes`): a compiled MLP
// fed batches of changing size. The first compile is static; the first size change recompiles
// with the batch dim symbolic (automatic dynamic); every later size reuses that graph, except
// sizes 0 and 1, which are always specialized.
#pragma once
#include <cstdio>
#include <vector>

#include "kiln.h"

namespace kiln::examples {

struct DynamicShapesModel {
  nn::Linear fc1{64, 128}, fc2{128, 64};
  nn::LayerNorm norm{64};
  Tensor forward(const Tensor& x) { return norm.forward(fc2.forward(gelu(fc1.forward(x))) + x); }
};

// Feeds the batch sizes below, printing what each call did; returns the compiled function's stats.
inline CompileStats run_dynamic_shapes_demo(DynamicShapesModel& model, bool print = true) {
  auto f = compile([&](const Tensor& x) { return model.forward(x); }, {.name = "dynamic_mlp"});
  const std::vector<int64_t> batches = {8, 8, 16, 32, 5, 64, 1, 128};
  int compiles = 0;
  for (int64_t b : batches) {
    Tensor x = randn({b, 64});
    Tensor y = f(x);
    double err = abs(y - model.forward(x)).max().item<double>();
    CompileStats s = f.stats();
    const char* what = s.compiles == compiles ? "cache hit" : s.recompiles == 0 ? "compiled (static)" : "recompiled";
    if (print)
      std::printf("batch %4lld: %-18s compiles %d, recompiles %d, cache hits %d, max |compiled - eager| %.2g\n",
                  (long long)b, what, s.compiles, s.recompiles, s.cache_hits, err);
    compiles = s.compiles;
  }
  CompileStats s = f.stats();
  if (print)
    for (size_t i = 0; i < s.recompile_reasons.size(); ++i)
      std::printf("recompile %zu: %s\n", i + 1, s.recompile_reasons[i].c_str());
  return s;
}

}  // namespace kiln::examples
