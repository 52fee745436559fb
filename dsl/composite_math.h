// Composite math written once, as templates over any value type with the Tensor API's operators
// and functions: Tensor (autograd's traced derivative rules, dsl/functions.h) and Emitted (the
// graph rewrites that decompose an op into primitives, graph/emitter.h). The fused kernels that
// eager mode runs define the same math in Halide (dsl/ops/); this is the primitive-op form that
// compiled graphs fuse with their neighbours.
#pragma once
#include <cstdint>
#include <vector>

namespace kiln {

// GPT-2's tanh form of GELU: x (1 + tanh(kGeluScale (x + kGeluCubic x^3))) / 2, kGeluScale =
// sqrt(2 / pi). The Halide definitions (dsl/ops/math_functions.h) and the decomposition
// (graph/decompose.cpp) read these.
inline constexpr double kGeluScale = 0.7978845608028654, kGeluCubic = 0.044715;

// A layer norm's rows normalized over `dims` (kept as size-1 dims): x - mean, 1 / std, and
// their product x-hat, the variance taken about the mean (two passes, as the fused kernel).
template <class T>
struct NormalizedRows {
  T centered, rstd, xhat;
};

template <class T>
NormalizedRows<T> normalize_rows(const T& x, const std::vector<int64_t>& dims, double eps) {
  T centered = x - mean(x, dims, true);
  T rstd = rsqrt(mean(square(centered), dims, true) + eps);
  return {centered, rstd, centered * rstd};
}

}  // namespace kiln
