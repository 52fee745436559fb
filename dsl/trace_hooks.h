// The calls dsl/ makes into graph capture (graph/ installs them; dsl never includes graph/).
// While a function is traced, its tensors are symbolic: they carry shapes, strides and dtypes but
// no data (TensorImpl::traced is set). Three things they cannot do without help from the tracer:
//   - give their values to the host (item(), to_vector(), printing, data_ptr(), copy_, backward):
//     the tracer breaks the graph there, runs what it has, and makes the tensor real in place;
//   - tell the host a size that the trace treats as symbolic: the tracer specializes it (guards
//     on its value), because host code may bake it into later ops;
//   - detach(): the tracer returns another symbolic tensor for the same value;
// and two more events:
//   - an in-place write (copy_) while a function is traced: into a whole real tensor (a
//     parameter, an optimizer's state) the graph records it functionally and writes the new value
//     back after it runs; any other write breaks the graph before it;
//   - backward() on a symbolic tensor: the tracer records the backward into the graph when every
//     tensor requiring grad in it is a leaf without a gradient yet (a compiled training step), and
//     breaks the graph otherwise.
#pragma once
#include <cstdint>
#include <source_location>
#include <string_view>

namespace kiln {

class Tensor;

struct TraceHooks {
  void (*materialize)(const Tensor& t, std::string_view reason, const std::source_location& where) = nullptr;
  void (*read_sizes)(const Tensor& t, int64_t dim, const std::source_location& where) = nullptr;  // dim -1: all
  Tensor (*alias)(const Tensor& t) = nullptr;
  // True when the tracer took the write into the graph (copy_ then does nothing more now).
  bool (*write)(const Tensor& dst, const Tensor& src, const std::source_location& where) = nullptr;
  // True when the tracer recorded the backward into the graph.
  bool (*backward)(const Tensor& root, const Tensor& gradient, const std::source_location& where) = nullptr;
};

void set_trace_hooks(const TraceHooks& hooks);
const TraceHooks& trace_hooks();

}  // namespace kiln

namespace kiln {

// Makes a symbolic tensor real (a graph break, for `reason` at `where`); no-op for real tensors.
void materialize(const Tensor& t, std::string_view reason, const std::source_location& where);

}  // namespace kiln
