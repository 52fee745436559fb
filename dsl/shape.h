// Shapes and strides (in elements, outermost dim first), and the rules ops share about them:
// broadcasting, dim wrapping, contiguous strides.
#pragma once
#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

using Shape = std::vector<int64_t>;
using Strides = std::vector<int64_t>;

int64_t numel(const Shape& s);
Strides contiguous_strides(const Shape& s);
bool is_contiguous(const Shape& s, const Strides& st);
std::string to_string(const Shape& s);  // "[2, 3]"

// Wraps a possibly negative dim into [0, rank); throws "op: dim d out of range for rank r".
int wrap_dim(std::string_view op, int64_t dim, int64_t rank);
// Wraps and sorts a list of dims; an empty list means all dims. Throws on repeats.
std::vector<int> wrap_dims(std::string_view op, const std::vector<int64_t>& dims, int64_t rank);

// Numpy broadcasting of two shapes; throws "op: shapes [..] and [..] do not broadcast".
Shape broadcast_shapes(std::string_view op, const Shape& a, const Shape& b);
// Strides that read a tensor of shape `s` (strides `st`) as the broadcast shape `to`
// (stride 0 on broadcast dims). `to` must be a broadcast of `s`.
Strides broadcast_strides(const Shape& s, const Strides& st, const Shape& to);

}  // namespace kiln
