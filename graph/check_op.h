// check_op: an op's registration checked against what its kernels do, like PyTorch's
// torch.library.opcheck. For each sample (inputs and attributes), eagerly and compiled:
//   shape_rule         the outputs' shapes, dtypes and devices are those the shape rule gives
//   no_input_writes    the inputs hold the same bits after the call
//   compiled           compile() of the op alone (fullgraph: no graph break) gives the eager
//                      outputs, with static shapes and with every size symbolic
//   autograd           a differentiable op's rule gives every float input a gradient of its
//                      shape and dtype, and the compiled backward (the rule traced into the joint
//                      graph) gives the eager gradients
//   gradcheck          the rule against central differences, in f64 (inputs converted), on the
//                      CPU (a CUDA sample's inputs moved there where the op has a CPU kernel)
//   cpu_vs_cuda        where the op has both kernels and a GPU is present, the same outputs
// Each failure names the check, the sample and what differed.
//
//   OpCheckReport r = check_op(op_def("myns::bias_gelu"), {{.inputs = {x, b}}});
//   if (!r.ok()) std::cerr << r.text();
#pragma once
#include <string>
#include <vector>

#include "dsl/attrs.h"
#include "dsl/op_def.h"
#include "dsl/tensor.h"

namespace kiln {

struct OpSample {
  TensorList inputs;
  Attrs attrs = {};
};

struct OpCheckFailure {
  std::string check;  // "shape_rule", "no_input_writes", "compiled", ...
  int sample = 0;
  std::string what;
};

struct OpCheckOptions {
  std::string backend = "halide";  // the compile() backend of the `compiled` and `autograd` checks
  double rtol = 0, atol = 0;       // 0: by dtype (1e-5 / 1e-6 for f32, 1e-10 / 1e-12 for f64)
};

struct OpCheckReport {
  std::vector<std::string> passed;   // "shape_rule (sample 0)", ...
  std::vector<std::string> skipped;  // and why: "cpu_vs_cuda (sample 0): no GPU"
  std::vector<OpCheckFailure> failures;
  bool ok() const { return failures.empty(); }
  std::string text() const;  // one line per failure, then the counts
  // Whether some failure is of this check.
  bool failed(const std::string& check) const;
};

OpCheckReport check_op(const OpDef& op, const std::vector<OpSample>& samples, const OpCheckOptions& options = {});

}  // namespace kiln
