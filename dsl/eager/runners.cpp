#include "dsl/eager/runners.h"

#include "dsl/error.h"

namespace kiln {

EagerRunner eager_runner(KernelFamily family) {
  switch (family) {
    case KernelFamily::unary:
    case KernelFamily::binary:
    case KernelFamily::where: return &run_pointwise;
    case KernelFamily::cast: return &run_cast;
    case KernelFamily::copy: return &run_copy;
    case KernelFamily::view: return &run_view;
    default: break;
  }
  throw_error("eager: no runner for kernel family ", int(family));
}

}  // namespace kiln
