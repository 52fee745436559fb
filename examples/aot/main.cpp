// kiln_aot_example: runs the ahead-of-time models of model.cpp with kiln::runtime alone (no
// libHalide, no LLVM, no compiler: the models' code was compiled when the example was built).
//  - example_gpt (inference): random token batches of several sizes; a batch outside the declared
//    range shows the model's error.
//  - example_gpt_train (a whole AdamW training step): five steps on a fixed batch; the loss must
//    fall.
//  - example_gpt_cuda (the inference model built for CUDA, without a GPU): on a machine with one,
//    the same batches on the GPU against example_gpt's logits, and its steady-state time; skipped
//    with the reason elsewhere.
// With a folder argument it writes the tokens and outputs there as .npy files, for kiln_aot_check
// (check.cpp), which compares them with kiln::compile of the same programs. `--weights DIR` reads
// the models' .safetensors files from DIR instead of where the build wrote them (the example
// copied to another machine).
//
//   kiln_aot_example [OUT_DIR] [--weights DIR]
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>

#include "example_gpt.h"
#include "example_gpt_cuda.h"
#include "example_gpt_train.h"
#include "kiln.h"

namespace {

using namespace kiln;

std::string weights_dir;  // --weights: where the .safetensors files are, when not where built

// A model's weights file: as the build wrote it, or its name in --weights DIR.
std::string weights(const std::string& built) {
  if (weights_dir.empty()) return built;
  return (std::filesystem::path(weights_dir) / std::filesystem::path(built).filename()).string();
}

Tensor tokens(int64_t batch) { return randint(0, 96, {batch, 32}, {.dtype = DType::i64}); }

// Writes `t` as DIR/name.npy when a folder was given.
void keep(const std::string& dir, const std::string& name, const Tensor& t) {
  if (!dir.empty()) save_npy((std::filesystem::path(dir) / (name + ".npy")).string(), t);
}

bool run_inference(const std::string& dir) {
  auto t0 = std::chrono::steady_clock::now();
  example_gpt::Model model(weights(EXAMPLE_GPT_WEIGHTS));
  NoGradGuard no_grad;
  manual_seed(1);
  Tensor first = model.forward(tokens(4));
  double first_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "example_gpt: " << model.signature() << "\n  weights loaded and first call in " << first_ms << " ms\n";
  bool ok = first.shape() == Shape{4, 32, 96};
  for (int64_t batch : {4, 2, 5, 16}) {
    Tensor t = tokens(batch), y = model.forward(t);
    std::cout << "  batch " << batch << ": logits " << to_string(y.shape()) << ", mean " << y.mean().item<float>() << "\n";
    keep(dir, "infer_" + std::to_string(batch) + "_tokens", t);
    keep(dir, "infer_" + std::to_string(batch) + "_logits", y);
    ok = ok && y.shape() == Shape{batch, 32, 96};
  }
  try {
    model.forward(tokens(17));
    ok = false;
  } catch (const Error& e) {
    std::cout << "  batch 17: " << e.what() << "\n";
  }
  return ok;
}

bool run_training(const std::string& dir) {
  example_gpt_train::Model model(weights(EXAMPLE_GPT_TRAIN_WEIGHTS));
  manual_seed(7);
  Tensor t = tokens(4), y = tokens(4);
  keep(dir, "train_tokens", t);
  keep(dir, "train_targets", y);
  std::cout << "example_gpt_train: " << model.signature() << "\n";
  std::vector<float> losses;
  for (int step = 0; step < 5; ++step) {
    losses.push_back(model.step(t, y).item<float>());
    std::cout << "  step " << step << ": loss " << losses.back() << "\n";
  }
  keep(dir, "train_losses", from_vector(losses));
  return losses.back() < losses.front();
}

double max_abs_diff(const Tensor& a, const Tensor& b) { return max(abs(a - b)).item<double>(); }

bool run_cuda(const std::string& dir) {
  if (!cuda_available()) {
    std::cout << "example_gpt_cuda: skipped: " << cuda_unavailable_reason() << "\n";
    return true;
  }
  const Device gpu = Device::cuda();
  auto t0 = std::chrono::steady_clock::now();
  example_gpt_cuda::Model model(weights(EXAMPLE_GPT_CUDA_WEIGHTS));
  example_gpt::Model on_cpu(weights(EXAMPLE_GPT_WEIGHTS));
  NoGradGuard no_grad;
  manual_seed(3);
  Tensor first = model.forward(tokens(4).to(gpu));
  cuda_synchronize(gpu.index);
  double first_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "example_gpt_cuda: " << model.signature() << "\n  weights loaded and first call in " << first_ms << " ms\n";
  bool ok = first.device() == gpu;
  for (int64_t batch : {4, 2, 5, 16}) {
    Tensor t = tokens(batch), y = model.forward(t.to(gpu)).to(Device::cpu());
    double diff = max_abs_diff(y, on_cpu.forward(t));
    std::cout << "  batch " << batch << ": logits " << to_string(y.shape()) << ", max |diff| from example_gpt " << diff << "\n";
    keep(dir, "infer_cuda_" + std::to_string(batch) + "_tokens", t);
    keep(dir, "infer_cuda_" + std::to_string(batch) + "_logits", y);
    ok = ok && y.shape() == Shape{batch, 32, 96} && diff <= 1e-3;
  }
  Tensor t = tokens(16).to(gpu);
  std::vector<double> ms;
  for (int i = 0; i < 25; ++i) {
    auto s0 = std::chrono::steady_clock::now();
    model.forward(t);
    cuda_synchronize(gpu.index);
    if (i >= 5) ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s0).count());
  }
  std::sort(ms.begin(), ms.end());
  std::cout << "  batch 16: " << ms[ms.size() / 2] << " ms a call (median of 20 after warm-up, synchronized)\n";
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::string dir;
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      if (a == "--weights" && i + 1 < argc) weights_dir = argv[++i];
      else if (dir.empty() && a.rfind("--", 0) != 0) dir = a;
      else throw std::invalid_argument("usage: kiln_aot_example [OUT_DIR] [--weights DIR] (unexpected '" + a + "')");
    }
    if (!dir.empty()) std::filesystem::create_directories(dir);
    bool ok = run_inference(dir);
    ok = run_training(dir) && ok;
    ok = run_cuda(dir) && ok;
    std::cout << (ok ? "ok" : "FAILED") << "\n";
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "kiln_aot_example: " << e.what() << "\n";
    return 1;
  }
}
