// An AOT model's manifest: what its library knows beyond the graph and plan (plan_file.h), as
// text records (graph/text_records.h): the model's name, its inputs' names in call order, and
// the target its code was compiled for and the declared range of each dynamic dim.
//
//   kiln-aot 1
//   model "tiny_mlp"
//   target "x86-64-linux-avx2-fma-..." [4,7,12]   the regions' Halide target and its features
//   input "x"                 one per input, in call order
//   outputs 1                 the function's outputs (the graph's others are written back)
//   dynamic 0 0 2 512         input position, dim, min, max
//   specialize 0 1 16 0       input position, dim, modulus (0: equality), value
//   end
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::aot {

struct DynamicRange {
  int input = 0;  // position among the inputs
  int dim = 0;
  int64_t min = 2, max = 0;
};

// A size specialization the pipelines have a branch for (aot/export.h): dim % modulus == value,
// or dim == value when modulus is 0.
struct SizeBranch {
  int input = 0;
  int dim = 0;
  int64_t modulus = 0, value = 0;
  bool holds(int64_t size) const { return modulus > 0 ? size % modulus == value : size == value; }
};

struct ManifestInput {
  std::string name;
};

struct Manifest {
  std::string model = {};
  std::string target = {};                // the Halide target the regions were compiled for
  std::vector<int> target_features = {};  // its features (halide_target_feature_t), for the CPU check
  std::vector<ManifestInput> inputs = {};
  std::vector<DynamicRange> dynamic = {};
  int outputs = 0;
  std::vector<SizeBranch> branches = {};
};

std::string write_manifest(const Manifest& m);
// kiln::Error naming the line for malformed text.
Manifest read_manifest(std::string_view text);

}  // namespace kiln::aot
