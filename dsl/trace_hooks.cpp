#include "dsl/trace_hooks.h"

#include "dsl/error.h"
#include "dsl/tensor.h"

namespace kiln {

namespace {
TraceHooks hooks;
}  // namespace

void set_trace_hooks(const TraceHooks& h) { hooks = h; }
const TraceHooks& trace_hooks() { return hooks; }

void materialize(const Tensor& t, std::string_view reason, const std::source_location& where) {
  if (!t.is_traced()) return;
  KILN_CHECK(hooks.materialize, reason, ": a symbolic tensor with no tracer installed");
  hooks.materialize(t, reason, where);
}

void Tensor::note_size_read(int64_t dim, const SourceLocation& where) const {
  if (hooks.read_sizes) hooks.read_sizes(*this, dim, where);
}

}  // namespace kiln
