// kiln_aot_example [WEIGHTS]: runs the ahead-of-time model example_gpt (model.cpp) on random
// token batches of several sizes and checks it against kiln::compile of the same program with the
// same weights: bit for bit where the schedules match (the same code), else within f32 tolerance.
// Exits non-zero on a mismatch. A batch outside the declared range shows the model's error.
#include <chrono>
#include <cmath>
#include <cstring>
#include <iostream>

#include "example_gpt.h"
#include "kiln.h"

kiln::aot::Program make_example_gpt();

namespace {

double max_abs_diff(const kiln::Tensor& a, const kiln::Tensor& b) {
  std::vector<float> x = a.to_vector<float>(), y = b.to_vector<float>();
  double d = 0;
  for (size_t i = 0; i < x.size(); ++i) d = std::max(d, double(std::abs(x[i] - y[i])));
  return d;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace kiln;
  using clock = std::chrono::steady_clock;
  std::string weights = argc > 1 ? argv[1] : EXAMPLE_GPT_WEIGHTS;
  try {
    auto t0 = clock::now();
    example_gpt::Model model(weights);
    NoGradGuard no_grad;
    Tensor first = model.forward(randint(0, 96, {4, 32}, {.dtype = DType::i64}));
    double first_ms = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
    std::cout << "example_gpt: " << model.signature() << "\n  weights loaded and first call in " << first_ms << " ms\n";

    aot::Program reference = make_example_gpt();
    nn::load_state_dict(*reference.module, weights);
    auto compiled = compile([&](Tensor t) { return reference.forward({t})[0]; }, {.backend = "halide"});
    bool ok = first.shape() == Shape{4, 32, 96};
    // compile traces first at the example's batch (4), as the model was: the size hints its
    // schedules were chosen for are the same, so the code is too.
    for (int64_t batch : {4, 2, 5, 16}) {
      Tensor tokens = randint(0, 96, {batch, 32}, {.dtype = DType::i64});
      mark_dynamic(tokens, 0);
      Tensor got = model.forward(tokens), want = compiled(tokens);
      bool same = got.shape() == want.shape() &&
                  std::memcmp(got.data_ptr(), want.data_ptr(), size_t(got.numel()) * sizeof(float)) == 0;
      double diff = max_abs_diff(got, want);
      std::cout << "  batch " << batch << ": " << (same ? "bit for bit equal to" : "differs from")
                << " kiln::compile (max |diff| " << diff << ")\n";
      ok = ok && diff <= 1e-4;
    }
    try {
      model.forward(randint(0, 96, {17, 32}, {.dtype = DType::i64}));
      ok = false;
    } catch (const Error& e) {
      std::cout << "  batch 17: " << e.what() << "\n";
    }
    std::cout << (ok ? "ok" : "MISMATCH") << "\n";
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "kiln_aot_example: " << e.what() << "\n";
    return 1;
  }
}
