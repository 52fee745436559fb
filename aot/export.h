// Ahead-of-time compilation of a Program (program.h): traces its function once on the examples
// through kiln::compile's own capture and passes (fullgraph: a graph break is an error naming its
// reason and source line), compiles the graph's regions to objects (schedules/object_export.h),
// and describes the model for the run-time side (model.h): the graph and its plan as text, a
// manifest of the inputs and their dynamic ranges, the weights. write_model_sources()
// (model_sources.h) turns that into the files kiln_add_model builds into a static library.
//
//   ExportedModel m = export_program(make_tiny_mlp(), {.name = "tiny_mlp", .dir = "out",
//                                                      .dynamic = {parse_dynamic_dim("x:0:2..512")}});
//   write_model_sources(m, "out");  // tiny_mlp.h, tiny_mlp.cpp, tiny_mlp_regions.o, tiny_mlp.safetensors
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "aot/program.h"

namespace kiln::aot {

// A dim declared dynamic: its sizes may be anything in [min, max].
struct DynamicDim {
  std::string input;
  int dim = 0;
  int64_t min = 2, max = 0;
  std::string text() const;  // "x:0:2..512"
};
// "x:0:2..512"; kiln::Error naming the text and the rule it breaks.
DynamicDim parse_dynamic_dim(const std::string& text);

// A size specialization of a dynamic dim: "x.1 % 64 == 0" (divisible) or "x.0 == 8" (equal).
// The pipelines that size by it get a specialize() branch (schedules/size_specialization.h).
struct Specialization {
  std::string input;
  int dim = 0;
  int64_t modulus = 0;  // 0: equality
  int64_t value = 0;
  std::string text() const;
};
// kiln::Error naming the text and the form it takes.
Specialization parse_specialization(const std::string& text);

struct ExportOptions {
  std::string name = {};  // a C++ identifier: the namespace and file names of the generated code
  std::string dir = {};   // where objects go
  std::vector<DynamicDim> dynamic = {};
  std::vector<Specialization> specialize = {};  // each on a dim declared dynamic
  // Halide CPU targets ("x86-64-linux-avx2-fma-f16c-sse41"), best first; "host" is this machine's.
  // Empty: host. Several: one object per target and a wrapper that picks at run time. Or one CUDA
  // target ("host-cuda", or a Halide target with the cuda feature; compute capability 8.0 unless
  // it names one): a CUDA model, traced on the CPU examples and compiled for the GPU, which
  // takes and returns CUDA tensors. Building one needs no GPU.
  std::vector<std::string> targets = {};
};

struct ExportedModel {
  std::string name;
  std::string manifest;  // model.h reads it: the inputs' names and the dynamic dims' ranges
  std::string plan;      // the graph and its plan (plan_file.h)
  std::string object;    // the regions' object (empty when the graph has no regions)
  std::vector<std::string> functions;  // the region functions the plan names
  std::vector<std::pair<std::string, Tensor>> weights;  // the module's parameters
  std::vector<std::string> input_names;
  int output_count = 0;
  bool trains = false;  // a training step: the generated entry point is step(), not forward()
  std::vector<std::string> specialized;  // the specialize() branches added, by region
  std::string summary;  // a line for the build log
};

ExportedModel export_program(const Program& program, const ExportOptions& options);

}  // namespace kiln::aot
