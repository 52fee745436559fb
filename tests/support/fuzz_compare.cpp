#include "support/fuzz_compare.h"

#include <cmath>
#include <sstream>

#include "support/reference.h"

namespace kiln::test {

// The tolerance of one output: its precision's (the least precise float dtype it went through);
// integers and bool are exact. `widen`, for backends that reorder or fuse float math (anything but
// "eager", which runs the very kernels eager code runs), grows it with the chain length and
// measures the absolute part against the output's largest element (cancellation).
Tolerance output_tolerance(const FuzzOutput& o, const Tensor& want, bool widen) {
  if (!is_floating(o.dtype)) return {0, 0};
  Tolerance t = tolerance(o.precision);
  if (!widen) return t;
  double k = 1 + std::sqrt(double(o.depth)), scale = 0;
  for (double x : host_values(want)) scale = std::max(scale, std::abs(x));
  return {t.rtol * k, std::max(t.atol, t.rtol * scale) * k};
}

// "" when `got` has want's shape and dtype and every element is within `tol` (check_close's rule);
// otherwise what differs. A string rather than Boost assertions, so that a test can show that it
// fails.
std::string mismatch(const Tensor& got, const Tensor& want, Tolerance tol) {
  std::ostringstream os;
  if (got.shape() != want.shape() || got.dtype() != want.dtype()) {
    os << "got " << got.dtype() << " " << to_string(got.shape()) << ", want " << want.dtype() << " "
       << to_string(want.shape());
    return os.str();
  }
  std::vector<double> g = host_values(got), w = host_values(want);
  int bad = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    double err = std::abs(g[i] - w[i]);
    bool ok = err <= tol.atol + tol.rtol * std::abs(w[i]) || (std::isnan(g[i]) && std::isnan(w[i])) || g[i] == w[i];
    if (!ok && bad++ < 4) os << (bad > 1 ? "; " : "") << "element " << i << ": got " << g[i] << ", want " << w[i];
  }
  if (bad) os << " (" << bad << " of " << g.size() << " out of tolerance: rtol " << tol.rtol << ", atol " << tol.atol << ")";
  return os.str();
}

}  // namespace kiln::test
