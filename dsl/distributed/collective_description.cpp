#include "dsl/distributed/collective_description.h"

#include <algorithm>
#include <sstream>

namespace kiln::distributed {

std::string_view name(Collective c) {
  switch (c) {
    case Collective::all_reduce: return "all_reduce";
    case Collective::broadcast: return "broadcast";
    case Collective::all_gather: return "all_gather";
    case Collective::reduce_scatter: return "reduce_scatter";
    case Collective::barrier: return "barrier";
  }
  return "?";
}

std::vector<int64_t> describe(Collective c, const Tensor* t, int64_t argument) {
  std::vector<int64_t> d(kDescription, 0);
  d[0] = int64_t(c);
  d[3] = argument;
  if (t) {
    d[1] = int64_t(t->dtype());
    d[2] = int64_t(t->dim());
    for (int k = 0; k < std::min<int>(t->dim(), kMaxDims); ++k) d[size_t(4 + k)] = t->shape()[size_t(k)];
  }
  return d;
}

std::string describe_text(const int64_t* d) {
  std::ostringstream os;
  os << name(Collective(d[0]));
  if (Collective(d[0]) == Collective::barrier) return os.str();
  os << " of " << name(DType(d[1])) << "[";
  for (int k = 0; k < std::min<int64_t>(d[2], kMaxDims); ++k) os << (k ? ", " : "") << d[4 + k];
  os << "]";
  if (Collective(d[0]) == Collective::broadcast) os << " from rank " << d[3];
  if (Collective(d[0]) == Collective::all_reduce || Collective(d[0]) == Collective::reduce_scatter)
    os << " (" << name(ReduceOp(d[3])) << ")";
  return os.str();
}

}  // namespace kiln::distributed
