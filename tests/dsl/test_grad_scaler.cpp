// GradScaler: scaled gradients unscale to the plain ones, an inf or NaN gradient skips the step
// (parameters and optimizer state untouched) and halves the scale, clean steps grow it after the
// interval, f16 autocast training recovers from a scale that overflows f16, and bad options or
// calls give errors.
#include <cmath>
#include <limits>

#include "support/reference.h"

using namespace kiln;
using namespace kiln::test;

namespace {

// loss = sum(tanh(x w)) / n for a [5, 4] x and a [4, 3] w.
Tensor small_loss(const Tensor& w, const Tensor& x) { return tanh(matmul(x, w)).sum() / 15.0; }

}  // namespace

BOOST_AUTO_TEST_CASE(scaled_gradients_unscale_to_the_plain_ones) {
  Tensor w = random_tensor({4, 3}, DType::f32, 1).requires_grad_();
  Tensor x = random_tensor({5, 4}, DType::f32, 2);
  small_loss(w, x).backward();
  std::vector<double> plain = host_values(w.grad());
  w.set_grad(Tensor());

  optim::SGD opt({w}, {.lr = 0.1});
  optim::GradScaler scaler(Device::cpu(), {.init_scale = 1024});
  Tensor scaled = scaler.scale(small_loss(w, x));
  scaled.backward();
  std::vector<double> scaled_grad = host_values(w.grad());
  for (size_t i = 0; i < plain.size(); ++i) BOOST_TEST(std::abs(scaled_grad[i] - 1024 * plain[i]) <= 1e-3 * 1024);
  scaler.unscale_(opt);
  check_close(w.grad(), plain, {4, 3}, {1e-6, 1e-7}, "unscaled gradient");
  BOOST_TEST(scaler.found_inf().item<float>() == 0.0f);
  check_error([&] { scaler.unscale_(opt); }, {"unscale_", "already"});
  std::vector<double> before = host_values(w);
  scaler.step(opt);  // unscaled already: only the step
  scaler.update();
  std::vector<double> after = host_values(w);
  for (size_t i = 0; i < plain.size(); ++i) BOOST_TEST(std::abs(after[i] - (before[i] - 0.1 * plain[i])) <= 1e-6);
  BOOST_TEST(scaler.get_scale() == 1024.0);
}

// An inf in the input makes the gradients inf or NaN: AdamW must not move the parameters or its
// moments and step count, so that the next clean step equals a first step of a fresh optimizer.
BOOST_AUTO_TEST_CASE(an_overflow_skips_the_step_and_halves_the_scale) {
  for (bool inf : {true, false}) {  // the bad value: inf, or NaN
    BOOST_TEST_CONTEXT((inf ? "inf" : "NaN")) {
      Tensor w = random_tensor({4, 3}, DType::f32, 3).requires_grad_();
      Tensor w_ref = w.detach().clone().requires_grad_();
      optim::AdamW opt({w}, {.lr = 0.01}), ref({w_ref}, {.lr = 0.01});
      optim::GradScaler scaler(Device::cpu(), {.init_scale = 256, .growth_interval = 100});
      std::vector<float> bad;
      for (double v : host_values(random_tensor({5, 4}, DType::f32, 4))) bad.push_back(float(v));
      bad[7] = inf ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
      std::vector<double> w0 = host_values(w);
      scaler.scale(small_loss(w, from_vector<float>(bad, {5, 4}))).backward();
      scaler.step(opt);
      BOOST_TEST(scaler.found_inf().item<float>() == 1.0f);
      scaler.update();
      opt.zero_grad();
      check_close(w, w0, {4, 3}, {0, 0}, "parameters after the skipped step");
      BOOST_TEST(scaler.get_scale() == 128.0);
      BOOST_TEST(scaler.growth_tracker().item<float>() == 0.0f);
      BOOST_TEST(scaler.found_inf().item<float>() == 0.0f);

      Tensor x = random_tensor({5, 4}, DType::f32, 5);
      scaler.scale(small_loss(w, x)).backward();
      scaler.step(opt);
      scaler.update();
      small_loss(w_ref, x).backward();
      ref.step();
      check_close(w, host_values(w_ref), {4, 3}, {1e-5, 1e-6}, "the clean step after it");
      BOOST_TEST(scaler.get_scale() == 128.0);
      BOOST_TEST(scaler.growth_tracker().item<float>() == 1.0f);
    }
  }
}

BOOST_AUTO_TEST_CASE(the_scale_grows_after_the_growth_interval) {
  Tensor w = random_tensor({4, 3}, DType::f32, 6).requires_grad_();
  optim::SGD opt({w}, {.lr = 0.01});
  optim::GradScaler scaler(Device::cpu(), {.init_scale = 8, .growth_factor = 4, .growth_interval = 3});
  std::vector<double> scales;
  for (int i = 0; i < 7; ++i) {
    scaler.scale(small_loss(w, random_tensor({5, 4}, DType::f32, 10 + uint64_t(i)))).backward();
    scaler.step(opt);
    scaler.update();
    opt.zero_grad();
    scales.push_back(scaler.get_scale());
  }
  BOOST_TEST(scales == std::vector<double>({8, 8, 32, 32, 32, 128, 128}), boost::test_tools::per_element());
}

// f16 autocast with a scale far past f16's range: the f16 gradients of the first steps overflow,
// those steps are skipped and the scale halves until they fit; then the loss goes down.
BOOST_AUTO_TEST_CASE(f16_training_recovers_from_an_overflowing_scale) {
  manual_seed(7);
  nn::MLP mlp({16, 32, 4});
  optim::AdamW opt(mlp.parameters(), {.lr = 1e-2});
  optim::GradScaler scaler(Device::cpu(), {.init_scale = std::ldexp(1.0, 40)});
  Tensor x = random_tensor({32, 16}, DType::f32, 8);
  std::vector<int64_t> labels;
  for (int i = 0; i < 32; ++i) labels.push_back(i % 4);
  Tensor y = from_vector<int64_t>(labels);
  int skipped = 0;
  double first = 0, last = 0;
  for (int step = 0; step < 60; ++step) {
    Tensor loss;
    {
      AutocastGuard ac(Device::cpu(), DType::f16);
      loss = cross_entropy(mlp.forward(x), y);
    }
    if (step == 0) first = loss.item<double>();
    last = loss.item<double>();
    scaler.scale(loss).backward();
    scaler.step(opt);
    skipped += scaler.found_inf().item<float>() > 0;
    scaler.update();
    opt.zero_grad();
  }
  BOOST_TEST(skipped >= 10, "skipped steps: " << skipped);  // 2^40 halves past 65504 / |grad| first
  BOOST_TEST(scaler.get_scale() < std::ldexp(1.0, 30));
  BOOST_TEST(last < 0.5 * first, "loss " << first << " -> " << last);
  for (const Tensor& p : mlp.parameters()) BOOST_TEST(p.dtype() == DType::f32);
}

BOOST_AUTO_TEST_CASE(bad_options_and_calls_give_errors) {
  check_error([] { optim::GradScaler s(Device::cpu(), {.init_scale = 0}); }, {"GradScaler", "init_scale"});
  check_error([] { optim::GradScaler s(Device::cpu(), {.growth_factor = 1}); }, {"GradScaler", "growth_factor"});
  check_error([] { optim::GradScaler s(Device::cpu(), {.backoff_factor = 1}); }, {"GradScaler", "backoff_factor"});
  check_error([] { optim::GradScaler s(Device::cpu(), {.growth_interval = 0}); }, {"GradScaler", "growth_interval"});
  optim::GradScaler s;
  check_error([&] { s.scale(from_vector<int64_t>({1})); }, {"GradScaler.scale", "floating", "i64"});
  Tensor w = random_tensor({2}, DType::f32, 9).requires_grad_();
  optim::SGD opt({w}, {.lr = 0.1});
  check_error([&] { opt.step_unless(zeros({}, {.dtype = DType::f32})); }, {"step_unless", "0-d bool"});
  optim::GradScaler off(Device::cpu(), {.enabled = false});
  Tensor loss = (w * w).sum();
  BOOST_TEST(off.scale(loss).impl_ptr() == loss.impl_ptr());
}
