// The memory-bound kernels of `kiln bench gpu --size real`: one case per GPU schedule class at the
// sizes a GPT-2 small training step runs (64 MB or more per operand where the model has them):
// pointwise, an AdamW update (0-d values mixed with a [50304, 768] table), row ops from 64 to 50304
// wide forward and backward, a column reduction (a bias gradient over 8192 rows), a full
// reduction, the embedding and its scatter-add backward, and the transposed copies of a backward.
// bench/torch/bench_real.py has the same cases by the same names and shapes; `bytes` counts what
// a fused kernel must read and write.
//
//   for (RealKernel& k : real_kernels(Device::cuda())) { auto in = k.inputs(); k.fn(in); }
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "kiln.h"

namespace kiln::bench {

struct RealKernel {
  std::string name;
  Shape shape;   // the main operand's
  double bytes;  // read plus written by one fused kernel
  std::function<std::vector<Tensor>(std::vector<Tensor>)> fn;
  std::function<std::vector<Tensor>()> inputs;  // fresh random inputs on the device
};

std::vector<RealKernel> real_kernels(Device d);

}  // namespace kiln::bench
