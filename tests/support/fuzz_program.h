// Random programs of Tensor ops for differential fuzzing: a program is generated from a seed, run
// with real ops (eagerly, or traced when called under kiln::compile), and printed as C++.
//
//   FuzzProgram p = generate_program(42, {});
//   TensorList xs = make_inputs(p, 1);
//   TensorList eager = run_program(p, xs);
//   auto f = compile([&](std::vector<Tensor> v) { return run_program(p, v); });
//   TensorList compiled = f(xs);               // compare with eager, output by output
//   std::cout << program_to_cpp(p);            // a lambda to paste into a test
//
// Every step keeps its values in ranges where every op is well conditioned (a unary op of the op
// database on its operand mapped into the entry's smooth range, safe denominators, magnitudes
// bounded), tensors stay small (input dims <= 8, at most 4096 elements), and structure comes from
// a local std::mt19937_64, never from kiln's generator. Programs with `rand_like` steps draw from
// kiln's generator: seed it (manual_seed) before each run that is compared.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kiln.h"

namespace kiln::test {

// What one step computes. Several are small compositions that keep values well conditioned; the
// exact expression of each is in run_program (and what program_to_cpp prints).
enum class FuzzOp : uint8_t {
  unary,  // an op of the unary op database (support/op_db.h); FuzzStep::variant is its index
  add, sub, mul, div, maximum, minimum, where,                                  // binary, broadcasting
  scalar,                                                                       // x * 2.5, x + s, s - x, x / s
  sum, mean, max, min, var, logsumexp,                                          // reductions
  softmax, log_softmax, layer_norm, matmul,
  transpose, permute, unsqueeze, squeeze, slice, narrow, expand, reshape, view, flatten, unflatten,
  contiguous, cat, cast, rand_like,
};
inline constexpr int kNumFuzzOps = int(FuzzOp::rand_like) + 1;
std::string_view fuzz_op_name(FuzzOp op);

// A dim of the shape model: factor * batch^batch_power (batch_power is 0 for static dims; only
// dynamic programs have a batch).
struct FuzzDim {
  int64_t factor = 1;
  int batch_power = 0;
};

struct FuzzStep {
  FuzzOp op = FuzzOp::unary;
  std::vector<int> args;        // value ids: inputs first, then one value per earlier step
  std::vector<int64_t> ints;    // dims, sizes, slice bounds, ... (per op: see run_program)
  std::vector<int64_t> shape;   // the shape of a constant operand (matmul, layer_norm's weight)
  int64_t variant = 0;          // which form of the op (comparison, keepdim, affine, ...)
  double scalar = 0;
  DType dtype = DType::f32;     // cast's target
};

// What a step computes, by name: its op's, or for a unary step its database entry's label.
std::string fuzz_step_name(const FuzzStep& s);
// Every name fuzz_step_name can give.
std::vector<std::string> fuzz_step_names();

struct FuzzInput {
  Shape shape;  // at the program's batch size (dim 0 in dynamic programs)
  DType dtype = DType::f32;
};

struct FuzzOutput {
  int value = 0;
  std::vector<FuzzDim> shape;  // the expected shape, as a function of the batch size
  DType dtype = DType::f32;
  // The least precise float dtype its computation went through, whose tolerance applies (integer
  // and bool outputs are compared exactly), and the longest chain of steps behind it.
  DType precision = DType::f64;
  int depth = 0;
};

struct FuzzConfig {
  int min_steps = 5, max_steps = 40;
  int max_inputs = 3;
  // Dynamic programs: dim 0 of every input is one batch size (2..5 when generated, any size in
  // 2..8 when run) that the program never bakes into sizes it passes to ops (reshape takes -1,
  // slices and constants use static dims only), so dim 0 may be marked dynamic.
  bool dynamic = false;
  bool low_precision = true;  // f16 and bf16 values
  bool random_ops = true;     // rand_like steps
};

struct FuzzProgram {
  uint64_t seed = 0;
  bool dynamic = false;
  int64_t batch = 0;  // dim 0 of every input, in dynamic programs
  // A reshape or flatten of a value that may not be contiguous: whether it is a view or a copy
  // can depend on the batch size, so compile may specialize the batch (and recompile once).
  bool layout_dependent = false;
  std::vector<FuzzInput> inputs;
  std::vector<FuzzStep> steps;
  std::vector<FuzzOutput> outputs;
};

FuzzProgram generate_program(uint64_t seed, const FuzzConfig& config);

// Runs the program's steps with real Tensor ops on `inputs` (one per program input) and returns
// its outputs. It reads no sizes on the host, so it traces without specializing.
TensorList run_program(const FuzzProgram& p, const TensorList& inputs);

// The program as a C++ lambda over `std::vector<Tensor> xs` using kiln's API, preceded by
// comments with the seed and the inputs' shapes and dtypes.
std::string program_to_cpp(const FuzzProgram& p);

// Random inputs in [-2, 2) (never zeros), from tests/support/reference.h's random_tensor; in a
// dynamic program `batch` > 0 replaces dim 0 of every input.
TensorList make_inputs(const FuzzProgram& p, uint64_t seed, int64_t batch = 0);

// The shape of output `i` when dim 0 of the inputs is `batch` (ignored by static programs).
Shape expected_shape(const FuzzProgram& p, size_t i, int64_t batch = 0);

}  // namespace kiln::test
