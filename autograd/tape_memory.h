// What the tape keeps alive: the bytes of the distinct storages that the backward nodes reachable
// from a tensor hold (their saved tensors), leaving out the storages of `alive_anyway` (the
// model's inputs and parameters). Benchmarks and tests compare the eager tape with a compiled
// function's single node with it.
//
//   int64_t eager = tape_saved_bytes(loss, model.parameters());
#pragma once
#include <cstdint>

#include "dsl/tensor.h"

namespace kiln {

int64_t tape_saved_bytes(const Tensor& root, const TensorList& alive_anyway);

}  // namespace kiln
