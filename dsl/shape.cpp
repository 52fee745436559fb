#include "dsl/shape.h"

#include <algorithm>
#include <sstream>

#include "dsl/error.h"

namespace kiln {

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

Strides contiguous_strides(const Shape& s) {
  Strides st(s.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    acc *= std::max<int64_t>(s[i], 1);
  }
  return st;
}

bool is_contiguous(const Shape& s, const Strides& st) {
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    if (s[i] == 0) return true;
    if (s[i] != 1 && st[i] != acc) return false;
    acc *= s[i];
  }
  return true;
}

std::string to_string(const Shape& s) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  os << ']';
  return os.str();
}

int wrap_dim(std::string_view op, int64_t dim, int64_t rank) {
  int64_t r = std::max<int64_t>(rank, 1);  // a 0-d tensor accepts dim 0 and -1, like PyTorch
  KILN_CHECK(dim >= -r && dim < r, op, ": dim ", dim, " out of range for a tensor of rank ", rank,
             " (expected ", -r, " <= dim < ", r, ")");
  return int(dim < 0 ? dim + r : dim);
}

std::vector<int> wrap_dims(std::string_view op, const std::vector<int64_t>& dims, int64_t rank) {
  std::vector<int> out;
  if (dims.empty()) {
    for (int i = 0; i < rank; ++i) out.push_back(i);
    return out;
  }
  for (int64_t d : dims) out.push_back(wrap_dim(op, d, rank));
  std::sort(out.begin(), out.end());
  KILN_CHECK(std::adjacent_find(out.begin(), out.end()) == out.end(), op,
             ": dim appears more than once in the dim list");
  if (rank == 0) out.clear();
  return out;
}

Shape broadcast_shapes(std::string_view op, const Shape& a, const Shape& b) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    KILN_CHECK(da == db || da == 1 || db == 1, op, ": shapes ", to_string(a), " and ", to_string(b),
               " do not broadcast (dim ", int64_t(i) - int64_t(n), ": ", da, " vs ", db,
               "; sizes must match or one must be 1)");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Strides broadcast_strides(const Shape& s, const Strides& st, const Shape& to) {
  Strides out(to.size(), 0);
  size_t off = to.size() - s.size();
  for (size_t i = 0; i < s.size(); ++i) out[off + i] = (s[i] == 1 && to[off + i] != 1) ? 0 : st[i];
  return out;
}

}  // namespace kiln
