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
    case KernelFamily::reduce: return &run_reduce;
    case KernelFamily::rows: return &run_rows;
    case KernelFamily::layer_norm: return &run_layer_norm;
    case KernelFamily::cross_entropy: return &run_cross_entropy;
    case KernelFamily::matmul: return &run_matmul;
    case KernelFamily::embedding: return &run_embedding;
    case KernelFamily::embedding_backward: return &run_embedding_backward;
    case KernelFamily::cat: return &run_cat;
    case KernelFamily::creation: return &run_creation;
    case KernelFamily::attention: return &run_attention;
    case KernelFamily::custom: return &run_custom;
    default: break;
  }
  throw_error("eager: no runner for kernel family ", int(family));
}

}  // namespace kiln
