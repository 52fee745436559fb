// Ahead-of-time export (aot/export.h) and the run-time model (aot/model.h), in one process: a
// transformer block with a dynamic batch is exported, its regions' object is linked into a
// shared library standing in for the static library kiln_add_model builds, and the model run
// from its plan and manifest must equal kiln::compile's output of the same function bit for bit
// (the same schedules) at two batch sizes, and eager within f32 tolerance. Every input the model
// was not built for, missing weights, and every export error give kiln::Error naming the problem.
// (tests/CMakeLists.txt builds and links a real kiln_add_model library: test_linked_model.)
#include <filesystem>
#include <fstream>

#include "aot/export.h"
#include "aot/manifest.h"
#include "aot/model.h"
#include "aot/model_sources.h"
#include "autograd/grad_mode.h"
#include "kiln.h"
#include "schedules/shared_library.h"
#include "support/reference.h"

using namespace kiln;
using namespace kiln::test;
namespace fs = std::filesystem;

namespace {

// The batch dim of both inputs of block_program, dynamic.
std::vector<aot::DynamicDim> dynamic_batch() {
  return {aot::parse_dynamic_dim("x:0:2..64"), aot::parse_dynamic_dim("scale:0:2..64")};
}

// A transformer block times a second input of the same shape: two inputs share the batch size.
aot::Program block_program(int64_t batch) {
  auto block = std::make_shared<nn::TransformerBlock>(32, 4, "tanh");
  block->eval();
  return {block,
          {{"x", randn({batch, 16, 32})}, {"scale", randn({batch, 16, 32})}},
          [block](const TensorList& in) { return TensorList{block->forward(in[0]) * in[1]}; }};
}

// The exported regions linked into a shared library, and a ModelCode over its functions.
struct LoadedCode {
  std::shared_ptr<SharedLibrary> library;
  std::vector<aot::FunctionEntry> functions;
  std::string name, manifest, plan;
  aot::ModelCode code() const { return {name.c_str(), manifest.c_str(), plan.c_str(), functions.data(), functions.size()}; }
};

LoadedCode load(const aot::ExportedModel& m, const TempDir& scratch) {
  LoadedCode c{nullptr, {}, m.name, m.manifest, m.plan};
  std::string so = scratch.file(m.name + ".so");
  link_shared_library({m.object}, so);
  c.library = std::make_shared<SharedLibrary>(so);
  for (const std::string& f : m.functions) c.functions.push_back({nullptr, c.library->function(f)});
  for (size_t i = 0; i < m.functions.size(); ++i) c.functions[i].name = m.functions[i].c_str();
  return c;
}

std::map<std::string, Tensor> weights_of(const aot::Program& p) {
  std::vector<std::pair<std::string, Tensor>> named = aot::program_weights(p);
  return {named.begin(), named.end()};
}

}  // namespace

BOOST_AUTO_TEST_CASE(exported_model_matches_compile_bit_for_bit) {
  TempDir scratch("kiln-test-aot");
  manual_seed(11);
  aot::Program p = block_program(4);
  aot::ExportedModel m = aot::export_program(
      p, {"block", scratch.path.string(), dynamic_batch()});
  BOOST_TEST(m.functions.size() >= 2u);
  BOOST_TEST(!m.object.empty());
  BOOST_TEST(m.summary.find("model block:") == 0u, m.summary);
  LoadedCode c = load(m, scratch);
  aot::Model model(c.code(), weights_of(p));
  BOOST_TEST(model.name() == "block");
  BOOST_TEST(model.signature().find("x: f32 [s0, 16, 32], dim 0 in 2..64") != std::string::npos, model.signature());

  // The same dims dynamic as the export's.
  auto f = compile([&](Tensor x, Tensor s) { return p.forward({x, s})[0]; }, {.backend = "halide"});
  NoGradGuard no_grad;
  for (int64_t batch : {4, 9, 64}) {
    Tensor x = randn({batch, 16, 32}), s = randn({batch, 16, 32});
    mark_dynamic(x, 0);
    mark_dynamic(s, 0);
    Tensor got = model.run({x, s}).at(0);
    BOOST_TEST(same_bits(got, f(x, s)), "batch " << batch);
    check_close(got, host_values(p.forward({x, s})[0]), {batch, 16, 32}, tolerance(DType::f32), "eager");
  }

  // Weights from a file, as kiln_add_model writes them; the generated sources name the functions.
  aot::write_model_sources(m, scratch.path.string());
  aot::Model from_file(c.code(), scratch.file("block.safetensors"));
  Tensor x = randn({3, 16, 32}), s = randn({3, 16, 32});
  BOOST_TEST(same_bits(from_file.run({x, s})[0], model.run({x, s})[0]));
  std::string text = file_bytes(scratch.file("block.cpp"));
  for (const std::string& fn : m.functions) BOOST_TEST(text.find(fn + "_argv") != std::string::npos, fn);
  BOOST_TEST(fs::file_size(scratch.file("block_regions.o")) > 0u);
}

BOOST_AUTO_TEST_CASE(inputs_the_model_was_not_built_for_are_errors) {
  TempDir scratch("kiln-test-aot");
  manual_seed(12);
  aot::Program p = block_program(4);
  aot::ExportedModel m = aot::export_program(
      p, {"block", scratch.path.string(), dynamic_batch()});
  LoadedCode c = load(m, scratch);
  aot::Model model(c.code(), weights_of(p));
  NoGradGuard no_grad;
  Tensor x = randn({4, 16, 32}), s = randn({4, 16, 32});
  check_error([&] { model.run({x}); }, {"model block", "takes 2 inputs", "got 1"});
  check_error([&] { model.run({x.to(DType::f64), s}); }, {"input x", "dtype f64", "built for f32"});
  check_error([&] { model.run({x.reshape({64, 32}), s}); }, {"input x", "2 dims", "[64, 32]", "built for 3"});
  check_error([&] { model.run({randn({4, 16, 33}), s}); }, {"x dim 2 is 33", "built for 32"});
  check_error([&] { model.run({randn({65, 16, 32}), randn({65, 16, 32})}); },
              {"x dim 0 is 65", "outside its declared range 2..64"});
  check_error([&] { model.run({randn({5, 16, 32}), s}); }, {"scale dim 0 is 4 but x dim 0 is 5", "needs them equal"});
  check_error([&] { model.run({x, Tensor()}); }, {"input scale is undefined"});
  // A non-contiguous input is copied, not refused.
  Tensor xt = randn({4, 32, 16}).transpose(1, 2);
  BOOST_TEST(same_bits(model.run({xt, s})[0], model.run({xt.contiguous(), s})[0]));

  std::map<std::string, Tensor> w = weights_of(p);
  std::string missing = w.begin()->first;
  w.erase(w.begin());
  check_error([&] { aot::Model bad(c.code(), w); }, {"model block", "has no tensor '" + missing + "'"});
  w = weights_of(p);
  w[missing] = randn({3});
  check_error([&] { aot::Model bad(c.code(), w); }, {"weight '" + missing + "'", "f32 [3]", "built for"});
  check_error([&] { aot::Model bad(c.code(), scratch.file("nowhere.safetensors")); },
              {"model block", "cannot load its weights", "nowhere.safetensors", "cannot open"});
  // Code for CPU features this machine lacks (Xeon Phi's AVX-512 ER and PF) is refused, not run.
  aot::Manifest manifest = aot::read_manifest(c.manifest);
  BOOST_TEST(!manifest.target.empty());
  manifest.target_features.push_back(halide_target_feature_avx512_knl);
  std::string elsewhere = aot::write_manifest(manifest);
  aot::ModelCode foreign = c.code();
  foreign.manifest = elsewhere.c_str();
  check_error([&] { aot::Model bad(foreign, weights_of(p)); }, {"model block", "compiled for", "lacks"});
  aot::ModelCode no_functions = c.code();
  no_functions.function_count = 0;
  check_error([&] { aot::Model bad(no_functions, weights_of(p)); }, {"read_plan", "no compiled function"});
}

BOOST_AUTO_TEST_CASE(export_errors_name_the_rule) {
  TempDir scratch("kiln-test-aot");
  manual_seed(13);
  aot::Program p = block_program(4);
  std::string dir = scratch.path.string();
  check_error([] { aot::parse_dynamic_dim("x:0"); }, {"DYNAMIC \"x:0\"", "input:dim:min..max"});
  check_error([] { aot::parse_dynamic_dim("x:a:2..8"); }, {"the dim 'a'"});
  check_error([] { aot::parse_dynamic_dim("x:0:1..8"); }, {"at least 2", "sizes 0 and 1"});
  check_error([] { aot::parse_dynamic_dim("x:0:9..8"); }, {"min <= max"});
  check_error([&] { aot::export_program(p, {"block", dir, {aot::parse_dynamic_dim("y:0:2..8")}}); },
              {"no input 'y'", "its inputs: x, scale"});
  check_error([&] { aot::export_program(p, {"block", dir, {aot::parse_dynamic_dim("x:0:8..16")}}); },
              {"example's size 4 is outside"});
  check_error([&] { aot::export_program(p, {"block", dir, {aot::parse_dynamic_dim("x:3:2..16")}}); },
              {"input x has 3 dims"});
  check_error([&] { aot::export_program(p, {"2block", dir, {}}); }, {"'2block'", "not a C++ identifier"});

  // A graph break (a host read) is an error naming its reason, as fullgraph does.
  aot::Program reads = p;
  reads.forward = [f = p.forward](const TensorList& in) {
    TensorList y = f(in);
    if (y[0].sum().item<float>() > 1e30f) return TensorList{y[0] * 2};
    return y;
  };
  check_error([&] { aot::export_program(reads, {"block", dir, {}}); }, {"graph break", "item", "test_export.cpp:"});
  // A tensor read from the enclosing scope must be a parameter.
  Tensor stray = randn({32});
  aot::Program captures = p;
  captures.forward = [f = p.forward, stray](const TensorList& in) { return TensorList{f(in)[0] + stray}; };
  check_error([&] { aot::export_program(captures, {"block", dir, {}}); }, {"not a parameter", "f32 [32]"});
  // A declared dynamic dim the function fixes.
  aot::Program fixed = p;
  fixed.forward = [f = p.forward](const TensorList& in) { return TensorList{f(in)[0].reshape({4, 512})}; };
  check_error([&] { aot::export_program(fixed, {"block", dir, {aot::parse_dynamic_dim("x:0:2..8"),
                                                                  aot::parse_dynamic_dim("scale:0:2..8")}}); },
              {"input x dim 0 is declared DYNAMIC", "needs it to be 4"});
  // Two dims the function needs equal, one of them declared static.
  check_error([&] { aot::export_program(p, {"block", dir, {aot::parse_dynamic_dim("x:0:2..8")}}); },
              {"input x dim 0 is declared DYNAMIC", "needs it to be 4", "mul's shape rule"});
}

BOOST_AUTO_TEST_CASE(manifest_reads_back) {
  aot::Manifest m{"tiny \"mlp\"", "x86-64-linux-avx2", {3, 70}, {{"x"}, {"mask"}}, {{0, 0, 2, 512}, {1, 1, 3, 9}}};
  aot::Manifest r = aot::read_manifest(aot::write_manifest(m));
  BOOST_TEST(r.model == m.model);
  BOOST_TEST(r.target == m.target);
  BOOST_TEST(r.target_features == m.target_features);
  BOOST_TEST(r.inputs.size() == 2u);
  BOOST_TEST(r.inputs[1].name == "mask");
  BOOST_TEST(r.dynamic.size() == 2u);
  BOOST_TEST(r.dynamic[1].input == 1);
  BOOST_TEST(r.dynamic[1].max == 9);
  check_error([] { aot::read_manifest("kiln-aot 1\nmodel \"m\"\n"); }, {"read_manifest", "no 'end'"});
  check_error([] { aot::read_manifest("kiln-aot 1\ndynamic 0 0 2 8\nend\n"); }, {"read_manifest: line 2", "out of range"});
  check_error([] { aot::read_manifest("kiln-aot 2\nend\n"); }, {"version 2"});
}

BOOST_AUTO_TEST_CASE(training_step_matches_the_compiled_step) {
  // Two copies of the same MLP and AdamW: one exported as a training step, one compiled.
  auto make = [] {
    manual_seed(31);
    auto mlp = std::make_shared<nn::MLP>(std::vector<int64_t>{24, 64, 8});
    auto opt = std::make_shared<optim::AdamW>(mlp->parameters(), optim::AdamWOptions{.lr = 1e-2});
    return std::make_pair(mlp, opt);
  };
  auto step_of = [](std::shared_ptr<nn::MLP> mlp, std::shared_ptr<optim::AdamW> opt) {
    return [mlp, opt](const TensorList& in) {
      Tensor d = mlp->forward(in[0]) - in[1];
      Tensor loss = (d * d).mean();
      loss.backward();
      opt->step();
      opt->zero_grad();
      return TensorList{loss};
    };
  };
  auto [mlp, opt] = make();
  auto [mlp2, opt2] = make();
  TempDir scratch("kiln-test-aot");
  manual_seed(32);
  aot::Program p{mlp, {{"x", randn({16, 24})}, {"y", randn({16, 8})}}, step_of(mlp, opt), opt};
  std::vector<double> initial = host_values(mlp->parameters()[0]);
  aot::ExportedModel m = aot::export_program(p, {"train", scratch.path.string(), {}});
  BOOST_TEST(m.trains);
  BOOST_TEST(host_values(mlp->parameters()[0]) == initial);  // tracing's step was undone
  std::vector<std::pair<std::string, Tensor>> named = aot::program_weights(p);
  BOOST_TEST(named.size() == 4u + 2 * 4u + 1u);
  BOOST_TEST(named.back().first == "optimizer.step");
  BOOST_TEST(named[4].first == "optimizer.exp_avg." + named[0].first);
  LoadedCode c = load(m, scratch);
  std::map<std::string, Tensor> weights(named.begin(), named.end());
  aot::Model model(c.code(), weights);

  auto compiled = compile(step_of(mlp2, opt2), {.backend = "halide"});
  for (int i = 0; i < 3; ++i) {
    Tensor x = randn({16, 24}), y = randn({16, 8});
    Tensor got = model.run({x, y}).at(0);
    Tensor want = compiled(TensorList{x, y}).at(0);
    BOOST_TEST(same_bits(got, want), "step " << i);
  }
  // The weights moved in place, as the compiled step's did.
  std::map<std::string, Tensor> after = model.weights();
  std::vector<std::pair<std::string, Tensor>> reference = aot::program_weights({mlp2, {}, {}, opt2});
  BOOST_TEST(after.size() == reference.size());
  for (const auto& [name, t] : reference) BOOST_TEST(same_bits(after.at(name), t), name);
  BOOST_TEST(host_values(mlp->parameters()[0]) != initial);
  BOOST_TEST(same_bits(after.at(named[0].first), named[0].second));  // the tensors given were updated
}

BOOST_AUTO_TEST_CASE(specializations_add_branches_that_compute_the_same) {
  TempDir scratch("kiln-test-aot");
  manual_seed(14);
  aot::Program p = block_program(8);
  std::vector<aot::DynamicDim> dynamic = dynamic_batch();
  aot::ExportedModel m = aot::export_program(
      p, {"block", scratch.path.string(), dynamic, {aot::parse_specialization("x.0 % 4 == 0"),
                                                    aot::parse_specialization("scale.0 == 8")}});
  BOOST_TEST(m.specialized.size() >= 2u);
  BOOST_TEST(m.summary.find("specialize() branches") != std::string::npos, m.summary);
  BOOST_TEST(aot::read_manifest(m.manifest).branches.size() == 2u);
  LoadedCode c = load(m, scratch);
  aot::Model model(c.code(), weights_of(p));
  NoGradGuard no_grad;
  for (int64_t batch : {8, 12, 5}) {  // both branches, one, none
    Tensor x = randn({batch, 16, 32}), s = randn({batch, 16, 32});
    check_close(model.run({x, s})[0], host_values(p.forward({x, s})[0]), {batch, 16, 32}, tolerance(DType::f32),
                "batch " + std::to_string(batch));
  }
  check_error([] { aot::parse_specialization("x.1"); }, {"SPECIALIZE \"x.1\"", "input.dim == value"});
  check_error([] { aot::parse_specialization("x.a == 3"); }, {"the dim 'a'"});
  check_error([] { aot::parse_specialization("x.0 % 1 == 0"); }, {"modulus of at least 2"});
  check_error([] { aot::parse_specialization("x.0 % 8 == 8"); }, {"value below it"});
  std::string dir = scratch.path.string();
  check_error([&] { aot::export_program(p, {"block", dir, dynamic, {aot::parse_specialization("x.1 % 4 == 0")}}); },
              {"x.1 % 4 == 0", "not declared DYNAMIC"});
  check_error([&] { aot::export_program(p, {"block", dir, dynamic, {aot::parse_specialization("x.0 == 99")}}); },
              {"99 is outside the dim's range 2..64"});
}

BOOST_AUTO_TEST_CASE(several_cpu_targets_make_one_library) {
  TempDir scratch("kiln-test-aot");
  manual_seed(15);
  aot::Program p = block_program(4);
  aot::ExportOptions o{"block", scratch.path.string(), dynamic_batch()};
  o.targets = {"x86-64-linux-avx2-fma-f16c-sse41", "x86-64-linux-sse41"};
  aot::ExportedModel m = aot::export_program(p, o);
  aot::Manifest manifest = aot::read_manifest(m.manifest);
  BOOST_TEST(manifest.target.find("x86-64-linux-") == 0u, manifest.target);
  BOOST_TEST(manifest.target.find("avx2") == std::string::npos, manifest.target);  // the baseline
  LoadedCode c = load(m, scratch);
  aot::Model model(c.code(), weights_of(p));
  NoGradGuard no_grad;
  for (int64_t batch : {4, 7}) {
    Tensor x = randn({batch, 16, 32}), s = randn({batch, 16, 32});
    check_close(model.run({x, s})[0], host_values(p.forward({x, s})[0]), {batch, 16, 32}, tolerance(DType::f32),
                "batch " + std::to_string(batch));
  }
  o.targets = {"x86-64-linux-avx3"};
  check_error([&] { aot::export_program(p, o); }, {"TARGETS x86-64-linux-avx3", "not a Halide target"});
  o.targets = {"host-cuda", "host"};
  check_error([&] { aot::export_program(p, o); }, {"TARGETS host-cuda", "built for one target"});
  o.targets = {"x86-64-linux-opencl"};
  check_error([&] { aot::export_program(p, o); }, {"TARGETS x86-64-linux-opencl", "CUDA only"});
  o.targets = {"x86-64-linux-sse41", "arm-64-linux"};
  check_error([&] { aot::export_program(p, o); }, {"TARGETS arm-64-linux", "same architecture"});
}

// A CUDA model is traced on the CPU and compiled for the GPU, without one: its graph's values are
// CUDA's, its regions' object holds kernels and calls Halide's CUDA runtime, and its examples'
// outputs come from running the traced graph on the CPU. Where no GPU is present, building the
// model is an error naming the target and the reason; on a GPU, tests/cuda/test_aot_model.cpp
// runs such models.
BOOST_AUTO_TEST_CASE(a_cuda_model_is_built_on_the_cpu) {
  TempDir scratch("kiln-test-aot");
  manual_seed(16);
  aot::Program p = block_program(4);
  std::vector<double> before = host_values(p.module->parameters()[0]);
  aot::ExportOptions o{"block", scratch.path.string(), dynamic_batch()};
  o.targets = {"host-cuda"};
  aot::ExportedModel m = aot::export_program(p, o);
  BOOST_TEST(m.summary.find("model block (CUDA):") == 0u, m.summary);
  BOOST_TEST(aot::read_manifest(m.manifest).target.find("cuda") != std::string::npos);
  BOOST_TEST(m.plan.find("cuda:0") != std::string::npos);
  BOOST_TEST(m.plan.find("cpu") == std::string::npos);
  std::string bytes = file_bytes(m.object);
  BOOST_TEST(bytes.find("halide_cuda_run") != std::string::npos);
  BOOST_TEST(host_values(p.module->parameters()[0]) == before);
  if (cuda_available()) return;
  LoadedCode c = load(m, scratch);
  check_error([&] { aot::Model(c.code(), weights_of(p)); }, {"model block", "built for CUDA", "cannot run CUDA"});
}
