// kiln_aot_example: runs the ahead-of-time models of model.cpp and checks them against
// kiln::compile of the same programs with the same weights, bit for bit where the schedules match
// (the same code), else within f32 tolerance; exits non-zero on a mismatch.
//  - example_gpt (inference): random token batches of several sizes; a batch outside the declared
//    range shows the model's error.
//  - example_gpt_train (a whole AdamW training step): five steps on a fixed batch; the losses
//    must match the compiled step's and fall.
#include <chrono>
#include <cmath>
#include <cstring>
#include <iostream>

#include "example_gpt.h"
#include "example_gpt_train.h"
#include "kiln.h"

kiln::aot::Program make_example_gpt();
kiln::aot::Program make_example_gpt_train();

namespace {

using namespace kiln;

double max_abs_diff(const Tensor& a, const Tensor& b) {
  std::vector<float> x = a.to_vector<float>(), y = b.to_vector<float>();
  double d = 0;
  for (size_t i = 0; i < x.size(); ++i) d = std::max(d, double(std::abs(x[i] - y[i])));
  return d;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.data_ptr(), b.data_ptr(), size_t(a.numel()) * sizeof(float)) == 0;
}

Tensor tokens(int64_t batch) { return randint(0, 96, {batch, 32}, {.dtype = DType::i64}); }

bool check_inference() {
  auto t0 = std::chrono::steady_clock::now();
  example_gpt::Model model(EXAMPLE_GPT_WEIGHTS);
  NoGradGuard no_grad;
  Tensor first = model.forward(tokens(4));
  double first_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "example_gpt: " << model.signature() << "\n  weights loaded and first call in " << first_ms << " ms\n";

  aot::Program reference = make_example_gpt();
  nn::load_state_dict(*reference.module, EXAMPLE_GPT_WEIGHTS);
  auto compiled = compile([&](Tensor t) { return reference.forward({t})[0]; }, {.backend = "halide"});
  bool ok = first.shape() == Shape{4, 32, 96};
  // compile traces first at the example's batch (4), as the model was: the size hints its
  // schedules were chosen for are the same, so the code is too.
  for (int64_t batch : {4, 2, 5, 16}) {
    Tensor t = tokens(batch);
    mark_dynamic(t, 0);
    Tensor got = model.forward(t), want = compiled(t);
    double diff = max_abs_diff(got, want);
    std::cout << "  batch " << batch << ": " << (same_bits(got, want) ? "bit for bit equal to" : "differs from")
              << " kiln::compile (max |diff| " << diff << ")\n";
    ok = ok && diff <= 1e-4;
  }
  try {
    model.forward(tokens(17));
    ok = false;
  } catch (const Error& e) {
    std::cout << "  batch 17: " << e.what() << "\n";
  }
  return ok;
}

bool check_training() {
  example_gpt_train::Model model(EXAMPLE_GPT_TRAIN_WEIGHTS);
  aot::Program reference = make_example_gpt_train();
  nn::load_state_dict(*reference.module, EXAMPLE_GPT_TRAIN_WEIGHTS);
  auto compiled = compile([&](Tensor t, Tensor y) { return reference.forward({t, y})[0]; }, {.backend = "halide"});
  manual_seed(7);
  Tensor t = tokens(4), y = tokens(4);
  std::cout << "example_gpt_train: " << model.signature() << "\n";
  bool ok = true;
  double first_loss = 0, last_loss = 0;
  for (int step = 0; step < 5; ++step) {
    Tensor got = model.step(t, y), want = compiled(t, y);
    double l = got.item<float>();
    if (step == 0) first_loss = l;
    last_loss = l;
    std::cout << "  step " << step << ": loss " << l << (same_bits(got, want) ? ", bit for bit" : ", differs from")
              << " kiln::compile's step (" << want.item<float>() << ")\n";
    ok = ok && std::abs(l - want.item<float>()) <= 1e-4 * std::max(1.0, std::abs(l));
  }
  return ok && last_loss < first_loss;
}

}  // namespace

int main() {
  try {
    bool ok = check_inference();
    ok = check_training() && ok;
    std::cout << (ok ? "ok" : "MISMATCH") << "\n";
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "kiln_aot_example: " << e.what() << "\n";
    return 1;
  }
}
