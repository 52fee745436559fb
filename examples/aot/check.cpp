// kiln_aot_check DIR: compares what kiln_aot_example wrote to DIR (main.cpp: the ahead-of-time
// models' outputs on its tokens) with kiln::compile of the same programs of model.cpp with the
// same weights: bit for bit where the schedules match (the same code), else within f32
// tolerance. The CUDA model's outputs, where the example ran on a GPU, against kiln::compile on
// the GPU (on a machine without one, on the CPU), within f32 tolerance. Exits non-zero on a
// mismatch. It links kiln::kiln (the JIT); the example does not.
//
//   kiln_aot_check DIR [--weights WEIGHTS_DIR]
#include <cmath>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "kiln.h"

kiln::aot::Program make_example_gpt();
kiln::aot::Program make_example_gpt_train();

namespace {

using namespace kiln;

std::string dir, weights_dir;

std::string weights(const std::string& built) {
  if (weights_dir.empty()) return built;
  return (std::filesystem::path(weights_dir) / std::filesystem::path(built).filename()).string();
}

Tensor read(const std::string& name) { return load_npy((std::filesystem::path(dir) / (name + ".npy")).string()); }

double max_abs_diff(const Tensor& a, const Tensor& b) {
  std::vector<float> x = a.to_vector<float>(), y = b.to_vector<float>();
  double d = 0;
  for (size_t i = 0; i < x.size(); ++i) d = std::max(d, double(std::abs(x[i] - y[i])));
  return d;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.data_ptr(), b.data_ptr(), size_t(a.numel()) * sizeof(float)) == 0;
}

bool check_inference() {
  aot::Program reference = make_example_gpt();
  nn::load_state_dict(*reference.module, weights(EXAMPLE_GPT_WEIGHTS));
  NoGradGuard no_grad;
  auto compiled = compile([&](Tensor t) { return reference.forward({t})[0]; }, {.backend = "halide"});
  std::cout << "example_gpt against kiln::compile:\n";
  bool ok = true;
  // compile traces first at the example's batch (4), as the model was: the size hints its
  // schedules were chosen for are the same, so the code is too.
  for (int64_t batch : {4, 2, 5, 16}) {
    std::string b = std::to_string(batch);
    Tensor t = read("infer_" + b + "_tokens"), got = read("infer_" + b + "_logits");
    mark_dynamic(t, 0);
    Tensor want = compiled(t);
    double diff = max_abs_diff(got, want);
    std::cout << "  batch " << batch << ": " << (same_bits(got, want) ? "bit for bit equal" : "differs")
              << " (max |diff| " << diff << ")\n";
    ok = ok && got.shape() == want.shape() && diff <= 1e-4;
  }
  return ok;
}

bool check_training() {
  aot::Program reference = make_example_gpt_train();
  nn::load_state_dict(*reference.module, weights(EXAMPLE_GPT_TRAIN_WEIGHTS));
  auto compiled = compile([&](Tensor t, Tensor y) { return reference.forward({t, y})[0]; }, {.backend = "halide"});
  Tensor t = read("train_tokens"), y = read("train_targets");
  std::vector<float> got = read("train_losses").to_vector<float>();
  std::cout << "example_gpt_train against kiln::compile's step:\n";
  bool ok = !got.empty();
  for (size_t step = 0; step < got.size(); ++step) {
    float want = compiled(t, y).item<float>();
    std::cout << "  step " << step << ": loss " << got[step] << (got[step] == want ? ", bit for bit" : ", differs from ")
              << (got[step] == want ? "" : std::to_string(want)) << "\n";
    ok = ok && std::abs(got[step] - want) <= 1e-4 * std::max(1.0f, std::abs(want));
  }
  return ok;
}

bool check_cuda() {
  if (!std::filesystem::exists(std::filesystem::path(dir) / "infer_cuda_4_logits.npy")) {
    std::cout << "example_gpt_cuda: no outputs (the example ran without a GPU)\n";
    return true;
  }
  aot::Program reference = make_example_gpt();
  nn::load_state_dict(*reference.module, weights(EXAMPLE_GPT_CUDA_WEIGHTS));
  const Device d = cuda_available() ? Device::cuda() : Device::cpu();
  reference.module->to(d);
  NoGradGuard no_grad;
  auto compiled = compile([&](Tensor t) { return reference.forward({t})[0]; }, {.backend = "halide"});
  std::cout << "example_gpt_cuda against kiln::compile on " << d.str() << ":\n";
  bool ok = true;
  for (int64_t batch : {4, 2, 5, 16}) {
    std::string b = std::to_string(batch);
    Tensor t = read("infer_cuda_" + b + "_tokens").to(d), got = read("infer_cuda_" + b + "_logits");
    mark_dynamic(t, 0);
    Tensor want = compiled(t).to(Device::cpu());
    double diff = max_abs_diff(got, want);
    std::cout << "  batch " << batch << ": " << (same_bits(got, want) ? "bit for bit equal" : "differs")
              << " (max |diff| " << diff << ")\n";
    ok = ok && got.shape() == want.shape() && diff <= 1e-3;
  }
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--weights" && i + 1 < argc) weights_dir = argv[++i];
    else if (dir.empty() && a.rfind("--", 0) != 0) dir = a;
    else dir.clear(), argc = 0;
  }
  if (dir.empty()) {
    std::cerr << "usage: kiln_aot_check DIR [--weights WEIGHTS_DIR]   (DIR: what `kiln_aot_example DIR` wrote)\n";
    return 2;
  }
  try {
    bool ok = check_inference();
    ok = check_training() && ok;
    ok = check_cuda() && ok;
    std::cout << (ok ? "ok" : "MISMATCH") << "\n";
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "kiln_aot_check: " << e.what() << "\n";
    return 1;
  }
}
