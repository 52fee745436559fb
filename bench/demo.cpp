// `kiln demo`: trains a tiny GPT to reverse sequences of digits (fresh random batches every
// step: "3 1 4 1 5 9 2 6 |" -> "6 2 9 5 1 4 1 3"), with AdamW, on the CPU or a CUDA device
// (--device cuda: the same model and batches, every op on the GPU), twice side by side from the
// same initial weights on the same batches: eagerly, and as a compiled training step (forward,
// loss, backward and the AdamW update in one graph on the halide backend). It prints both losses
// every few steps, then a summary (compile time, step times, speedup, both final losses and
// accuracies), the trained model's forward on 256 sequences eager against compiled, and where
// one eager training step spends its time. With --precision bf16 or f16 both runs train under
// autocast (f16 with a GradScaler), and a third copy trains compiled in f32 on the same batches,
// so the two precisions stand side by side.
#include <cmath>
#include <cstdio>

#include "bench/commands.h"
#include "bench/json.h"
#include "bench/op_profile.h"
#include "bench/timing.h"
#include "kiln.h"
#include "schedules/disk_cache.h"

namespace kiln::bench {

namespace {

constexpr int64_t kDigits = 8, kSeparator = 10, kVocab = 11;

struct Batch {
  Tensor tokens;   // (B, 2n): digits, separator, reversed digits without the last
  Tensor targets;  // (B, n): the reversed digits
};

Batch make_batch(int64_t batch, Device device) {
  Tensor digits = randint(0, 10, {batch, kDigits});
  std::vector<int64_t> d = digits.to_vector<int64_t>(), tok, tgt;
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t* row = &d[size_t(b * kDigits)];
    for (int64_t i = 0; i < kDigits; ++i) tok.push_back(row[i]);
    tok.push_back(kSeparator);
    for (int64_t i = kDigits - 1; i > 0; --i) tok.push_back(row[i]);
    for (int64_t i = kDigits - 1; i >= 0; --i) tgt.push_back(row[i]);
  }
  return {from_vector(tok, {batch, 2 * kDigits}).to(device), from_vector(tgt, {batch, kDigits}).to(device)};
}

// Cross-entropy over the answer half of each sequence.
Tensor loss_of(nn::TinyGpt& model, const Tensor& tokens, const Tensor& targets) {
  Tensor logits = model.forward(tokens).narrow(1, kDigits, kDigits);
  return cross_entropy(logits.reshape({-1, kVocab}), targets.reshape({-1}));
}

// How a run trains: in f32, or under autocast to `lower` (f16 with a loss scaler).
struct Precision {
  DType lower = DType::f32;
  std::unique_ptr<optim::GradScaler> scaler;

  Precision(DType t, Device device) : lower(t) {
    KILN_CHECK(t == DType::f32 || t == DType::bf16 || t == DType::f16, "demo: --precision must be f32, bf16 or f16, "
               "got ", t);
    if (t == DType::f16) scaler = std::make_unique<optim::GradScaler>(device);
  }
  bool mixed() const { return lower != DType::f32; }
};

Tensor train_step(nn::TinyGpt& model, optim::Optimizer& opt, const Tensor& tokens, const Tensor& targets,
                  Precision& precision) {
  Tensor loss;
  {
    AutocastGuard autocast(tokens.device(), precision.mixed() ? precision.lower : DType::bf16, precision.mixed());
    loss = loss_of(model, tokens, targets);
  }
  if (precision.scaler) {
    precision.scaler->scale(loss).backward();
    precision.scaler->step(opt);
    precision.scaler->update();
  } else {
    loss.backward();
    opt.step();
  }
  opt.zero_grad();
  return loss;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double accuracy(const Tensor& logits, const Batch& b) {
  Tensor pred = argmax(logits.narrow(1, kDigits, kDigits), -1);
  return mean(eq(pred, b.targets).to(f32)).item<double>();
}

struct Inference {
  double eager_ms = 0, compiled_ms = 0, compile_s = 0, eager_accuracy = 0, compiled_accuracy = 0;
  bool from_disk_cache = false;
};

// Waits for the device, so that wall-clock times of CUDA work include the work.
void wait_for(Device d) {
  if (d.is_cuda()) cuda_synchronize(d.index);
}

// The trained model's forward on one batch, eager and compiled.
Inference measure_inference(nn::TinyGpt& model, const Batch& b, Device d) {
  NoGradGuard no_grad;
  Inference r;
  CompiledFunction<Tensor(Tensor)> compiled([&model](Tensor t) { return model.forward(t); },
                                            {.backend = "halide", .name = "tiny_gpt_forward"}, &model);
  int64_t hits = disk_cache_stats().hits;
  double t0 = now_seconds();
  Tensor logits = compiled(b.tokens);
  r.compile_s = now_seconds() - t0;
  r.from_disk_cache = disk_cache_stats().hits > hits;
  r.compiled_accuracy = accuracy(logits, b);
  r.eager_accuracy = accuracy(model.forward(b.tokens), b);
  r.eager_ms = time_median([&] { model.forward(b.tokens); wait_for(d); }, 1, 3, 15, 0.5, 200).median_s * 1e3;
  r.compiled_ms = time_median([&] { compiled(b.tokens); wait_for(d); }, 1, 3, 15, 0.5, 200).median_s * 1e3;
  return r;
}

}  // namespace

int run_demo(const DemoOptions& opts) {
  KILN_CHECK(opts.steps >= 1, "demo: --steps must be >= 1");
  KILN_CHECK(opts.device.is_cpu() || cuda_available(), "demo: --device ", opts.device, " needs a CUDA device: ",
             cuda_unavailable_reason());
  const int64_t batch = 32;
  const nn::GptConfig config{.vocab = kVocab, .seq = 2 * kDigits, .width = 64, .heads = 4, .layers = 2};
  manual_seed(0);
  nn::TinyGpt model(config);
  manual_seed(0);
  nn::TinyGpt twin(config);  // the same initial weights, trained by the compiled step
  model.to(opts.device);     // drawn on the CPU: the same initial weights on every device
  twin.to(opts.device);
  optim::AdamW opt(model.parameters(), {.lr = 3e-3, .weight_decay = 0.01});
  optim::AdamW twin_opt(twin.parameters(), {.lr = 3e-3, .weight_decay = 0.01});
  Precision precision(opts.precision, opts.device), twin_precision(opts.precision, opts.device);
  auto compiled_step = compile([&](const Tensor& tokens, const Tensor& targets) {
    return train_step(twin, twin_opt, tokens, targets, twin_precision);
  }, {.backend = "halide", .fullgraph = true, .name = "tiny_gpt_train_step"});
  // The f32 run beside a mixed-precision one: the same initial weights, compiled.
  const bool mixed = precision.mixed();
  manual_seed(0);
  nn::TinyGpt f32_model(config);
  f32_model.to(opts.device);
  optim::AdamW f32_opt(f32_model.parameters(), {.lr = 3e-3, .weight_decay = 0.01});
  Precision f32_precision(DType::f32, opts.device);
  auto f32_step = compile([&](const Tensor& tokens, const Tensor& targets) {
    return train_step(f32_model, f32_opt, tokens, targets, f32_precision);
  }, {.backend = "halide", .fullgraph = true, .name = "tiny_gpt_train_step_f32"});
  int64_t params = 0;
  for (const Tensor& p : model.parameters()) params += p.numel();

  std::printf("kiln demo: train a tiny GPT to reverse %lld digits on %s, eagerly and compiled, side by side\n",
              (long long)kDigits, opts.device.str().c_str());
  std::printf("  model: vocab %lld, sequence %lld, width 64, 4 heads, 2 layers, %lld parameters; AdamW lr 3e-3\n",
              (long long)kVocab, (long long)(2 * kDigits), (long long)params);
  std::printf("  data: fresh batches of %lld random sequences each step, the same for both; loss over the answer half\n",
              (long long)batch);
  std::printf("  compiled: kiln::compile of the whole step (forward, loss, backward, AdamW) on the halide backend\n");
  if (mixed)
    std::printf("  precision: %s autocast (matmuls in %s, softmax, layer_norm and the loss in f32%s), beside a "
                "compiled f32 run\n", std::string(name(opts.precision)).c_str(), std::string(name(opts.precision)).c_str(),
                precision.scaler ? "; GradScaler" : "");
  std::printf("\n  %9s  %11s %13s  %8s %11s", "step", "eager loss", "compiled loss", "eager ms", "compiled ms");
  if (mixed) std::printf("  %8s %7s", "f32 loss", "f32 ms");
  std::printf("\n");

  std::vector<double> eager_s, compiled_s, f32_s;
  float loss_first = 0, loss_last = 0, compiled_first = 0, compiled_last = 0, f32_first = 0, f32_last = 0;
  double compile_s = 0;
  int every = std::max(1, opts.steps / 15);
  double t_start = now_seconds();
  for (int step = 1; step <= opts.steps; ++step) {
    Batch b = make_batch(batch, opts.device);
    double t0 = now_seconds();
    float value = train_step(model, opt, b.tokens, b.targets, precision).item<float>();
    eager_s.push_back(now_seconds() - t0);
    t0 = now_seconds();
    float compiled_value = compiled_step(b.tokens, b.targets).item<float>();
    if (step == 1) compile_s = now_seconds() - t0;  // tracing and compiling, then the step
    else compiled_s.push_back(now_seconds() - t0);
    float f32_value = 0;
    if (mixed) {
      t0 = now_seconds();
      f32_value = f32_step(b.tokens, b.targets).item<float>();
      if (step > 1) f32_s.push_back(now_seconds() - t0);
    }
    if (step == 1) loss_first = value, compiled_first = compiled_value, f32_first = f32_value;
    loss_last = value, compiled_last = compiled_value, f32_last = f32_value;
    if (step % every == 0 || step == 1 || step == opts.steps) {
      std::printf("  %4d/%-4d  %11.4f %13.4f  %8.2f %11.2f", step, opts.steps, value, compiled_value,
                  eager_s.back() * 1e3, (step == 1 ? compile_s : compiled_s.back()) * 1e3);
      if (mixed && step > 1) std::printf("  %8.4f %7.2f", f32_value, f32_s.back() * 1e3);
      if (mixed && step == 1) std::printf("  %8.4f %7s", f32_value, "-");
      std::printf("%s\n", step == 1 ? "  (compiles)" : "");
    }
  }
  double total_s = now_seconds() - t_start;

  OpProfile profile;
  double profiled_s = 0;
  {
    Batch b = make_batch(batch, opts.device);
    DispatchModeGuard g(&profile);
    double t0 = now_seconds();
    train_step(model, opt, b.tokens, b.targets, precision);
    wait_for(opts.device);
    profiled_s = now_seconds() - t0;
  }
  Batch test = make_batch(256, opts.device);
  double compiled_acc = 0;
  {
    NoGradGuard no_grad;
    compiled_acc = accuracy(twin.forward(test.tokens), test);
  }
  Inference inference = measure_inference(model, test, opts.device);
  double acc = inference.eager_accuracy;
  double eager_ms = median(eager_s) * 1e3, compiled_ms = compiled_s.empty() ? 0 : median(compiled_s) * 1e3;
  double loss_gap = std::abs(double(loss_last) - double(compiled_last));

  std::printf("\n  %-28s %12s %12s\n", "training", "eager", "compiled");
  std::printf("  %-28s %12s %12.2f\n", "compile time (s)", "-", compile_s);
  std::printf("  %-28s %12.2f %12.2f\n", "step time, median (ms)", eager_ms, compiled_ms);
  std::printf("  %-28s %12s %11.2fx\n", "speedup", "", compiled_ms > 0 ? eager_ms / compiled_ms : 0.0);
  std::printf("  %-28s %12.4f %12.4f\n", "loss, first step", loss_first, compiled_first);
  std::printf("  %-28s %12.4f %12.4f\n", "loss, last step", loss_last, compiled_last);
  std::printf("  %-28s %11.1f%% %11.1f%%\n", "answer digits right (256)", acc * 100, compiled_acc * 100);
  std::printf("  %-28s %12.1f\n", "total time, both (s)", total_s);
  if (loss_gap == 0)
    std::printf("  the final losses are equal to the last bit\n");
  else
    std::printf("  the final losses differ by %.2g (%.2g of the eager one): two runs of the same training whose sums\n"
                "  are rounded in different orders\n",
                loss_gap, loss_gap / std::max(1e-12, std::abs(double(loss_last))));
  if (mixed) {
    double f32_ms = f32_s.empty() ? 0 : median(f32_s) * 1e3;
    double f32_acc;
    {
      NoGradGuard no_grad;
      f32_acc = accuracy(f32_model.forward(test.tokens), test);
    }
    std::printf("\n  %-28s %12s %12s\n", "compiled, both precisions", name(opts.precision).data(), "f32");
    std::printf("  %-28s %12.2f %12.2f\n", "step time, median (ms)", compiled_ms, f32_ms);
    std::printf("  %-28s %12.4f %12.4f\n", "loss, first step", compiled_first, f32_first);
    std::printf("  %-28s %12.4f %12.4f\n", "loss, last step", compiled_last, f32_last);
    std::printf("  %-28s %11.1f%% %11.1f%%\n", "answer digits right (256)", compiled_acc * 100, f32_acc * 100);
    if (precision.scaler)
      std::printf("  %-28s %12g\n", "loss scale at the end", twin_precision.scaler->get_scale());
  }
  std::printf("\n  inference on 256 sequences     %12s %12s\n", "eager", "compiled");
  std::printf("  %-28s %12s %12.2f%s\n", "compile time (s)", "-", inference.compile_s,
              inference.from_disk_cache ? "  (from the disk cache)" : "");
  std::printf("  %-28s %12.2f %12.2f\n", "forward, median (ms)", inference.eager_ms, inference.compiled_ms);
  std::printf("  %-28s %12s %11.2fx\n", "speedup", "", inference.eager_ms / inference.compiled_ms);
  std::printf("  %-28s %11.1f%% %11.1f%%\n", "answer digits right", inference.eager_accuracy * 100,
              inference.compiled_accuracy * 100);
  std::printf("\n  where one eager training step spends its time (%.2f ms: forward, backward and optimizer ops):\n",
              profiled_s * 1e3);
  profile.print(profiled_s);

  if (!opts.json_path.empty()) {
    Json j = Json::object();
    j.set("device", opts.device.str()).set("steps", opts.steps).set("loss_first", double(loss_first));
    j.set("precision", std::string(name(opts.precision)));
    if (mixed)
      j.set("f32_compiled_step_ms_median", f32_s.empty() ? 0.0 : median(f32_s) * 1e3)
          .set("f32_loss_last", double(f32_last));
    j.set("loss_last", double(loss_last)).set("eager_step_ms_median", eager_ms);
    j.set("accuracy", acc).set("parameters", params);
    j.set("eager_forward_ms", inference.eager_ms).set("compiled_forward_ms", inference.compiled_ms);
    j.set("compile_s", inference.compile_s).set("compiled_accuracy", inference.compiled_accuracy);
    j.set("compiled_step_ms_median", compiled_ms).set("compiled_train_compile_s", compile_s);
    j.set("compiled_loss_first", double(compiled_first)).set("compiled_loss_last", double(compiled_last));
    j.set("compiled_train_accuracy", compiled_acc);
    write_file_atomic(opts.json_path, j.dump());
    std::printf("\nwrote %s\n", opts.json_path.c_str());
  }
  return 0;
}

}  // namespace kiln::bench
