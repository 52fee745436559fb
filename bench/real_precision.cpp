#include "bench/real_precision.h"

#include <cstdio>
#include <optional>
#include <algorithm>
#include <cmath>
#include <random>

#include "bench/timing.h"
#include "bench/zoo.h"

namespace kiln::bench {

namespace {

constexpr int64_t kBatch = 8, kSeq = 1024, kVocab = 50304;
constexpr int kTail = 10;  // the final loss is the mean of this many last steps

// The stream: a fixed random successor for every token and Zipf-distributed token frequencies
// (exponent 1.1). Each row starts from a Zipf draw; each next token is the current one's successor
// with probability 3/4, else a fresh Zipf draw. A model learns the frequencies within a few
// steps, then the successors, so the loss falls smoothly from the start.
struct Stream {
  std::vector<int64_t> successor;
  std::vector<double> cdf;  // of the Zipf frequencies, over token ids

  Stream() : successor(size_t(kVocab)), cdf(size_t(kVocab)) {
    std::mt19937_64 rng(7);
    for (int64_t i = 0; i < kVocab; ++i) successor[size_t(i)] = i;
    std::shuffle(successor.begin(), successor.end(), rng);
    double total = 0;
    for (int64_t i = 0; i < kVocab; ++i) cdf[size_t(i)] = total += std::pow(double(i + 1), -1.1);
    for (double& c : cdf) c /= total;
  }
  int64_t zipf(std::mt19937_64& rng) const {
    double u = std::uniform_real_distribution<double>(0, 1)(rng);
    return std::min<int64_t>(int64_t(std::lower_bound(cdf.begin(), cdf.end(), u) - cdf.begin()), kVocab - 1);
  }
  // Batch `step`: tokens [8, 1024] and the next tokens, flattened, on d.
  std::pair<Tensor, Tensor> batch(int step, Device d) const {
    std::mt19937_64 rng(1000 + uint64_t(step));
    std::vector<int64_t> tokens, targets;
    for (int64_t r = 0; r < kBatch; ++r) {
      int64_t t = zipf(rng);
      for (int64_t i = 0; i < kSeq; ++i) {
        tokens.push_back(t);
        t = std::uniform_real_distribution<double>(0, 1)(rng) < 0.75 ? successor[size_t(t)] : zipf(rng);
        targets.push_back(t);
      }
    }
    return {from_vector(tokens, {kBatch, kSeq}).to(d), from_vector(targets, {kBatch * kSeq}).to(d)};
  }
};

struct Run {
  std::string precision;
  bool compiled = true;
  std::vector<double> losses;
  int skipped = 0;
  double scale_before = 0, scale_after = 0;  // f16: the loss scale around the injected overflow
  double ms = 0;
};

Run train(Device d, const std::string& precision, int steps, bool compiled, const Stream& stream) {
  std::optional<DType> autocast;
  if (precision != "tf32") autocast = dtype_from_name(precision);
  manual_seed(0);
  zoo::ZooModel m = zoo::make_zoo_model("gpt2_small", zoo::ZooSize::real, d);
  optim::AdamW opt(m.module->parameters(), {.lr = 6e-4, .weight_decay = 0.1});
  std::optional<optim::GradScaler> scaler;
  if (autocast == DType::f16) scaler.emplace(d);
  // xs: tokens, targets, the factor the loss is multiplied by (1, or 1e30 to inject an overflow).
  auto one_step = [&](std::vector<Tensor> xs) {
        Tensor loss;
        {
          std::optional<AutocastGuard> guard;
          if (autocast) guard.emplace(d, *autocast);
          Tensor logits = m.forward({xs[0]})[0];
          loss = cross_entropy(logits.reshape({-1, kVocab}).to(DType::f32), xs[1]);
        }
        Tensor objective = loss * xs[2];
        if (scaler) {
          scaler->scale(objective).backward();
          scaler->step(opt);
          scaler->update();
        } else {
          objective.backward();
          opt.step();
        }
        opt.zero_grad();
        return loss;
  };
  auto step = compile(one_step, {.backend = "halide", .name = "gpt2_small " + precision + " train step"});
  Run r;
  r.precision = precision;
  r.compiled = compiled;
  const Tensor one = full({}, 1.0, {.device = d}), overflow = full({}, 1e30, {.device = d});
  const int inject = steps / 2;
  double scale = scaler ? scaler->get_scale() : 0;
  double start = 0;
  for (int i = 0; i < steps; ++i) {
    if (i == 1) {
      cuda_synchronize(d.index);
      start = now_seconds();
    }
    auto [tokens, targets] = stream.batch(i, d);
    if (scaler && i == inject) r.scale_before = scaler->get_scale();
    std::vector<Tensor> xs{tokens, targets, scaler && i == inject ? overflow : one};
    Tensor loss = compiled ? step(xs) : one_step(xs);
    if (scaler) {  // update() clears found_inf; a skipped step shows as a lowered scale
      double now = scaler->get_scale();
      if (now < scale) ++r.skipped;
      scale = now;
      if (i == inject) r.scale_after = now;
    }
    r.losses.push_back(loss.item<float>());
    if (i == 0 || (i + 1) % 50 == 0) std::printf("    %s %s step %d: loss %.4f\n", precision.c_str(), compiled ? "compiled" : "eager",
                                       i + 1, r.losses.back()), std::fflush(stdout);
  }
  r.ms = (now_seconds() - start) * 1e3 / std::max(1, steps - 1);
  return r;
}

double tail_mean(const std::vector<double>& losses) {
  double s = 0;
  int n = 0;
  for (size_t i = losses.size() >= kTail ? losses.size() - kTail : 0; i < losses.size(); ++i, ++n) s += losses[i];
  return n ? s / n : 0;
}

}  // namespace

Json compare_precisions(Device d, int steps) {
  KILN_CHECK(steps >= 2 * kTail, "kiln bench gpu --only precision: --steps must be at least ", 2 * kTail, ", got ", steps);
  std::printf("\ngpt2_small trained %d steps on a synthetic stream (Zipf tokens, 3/4 followed by a fixed "
              "successor); host syncs every step for the loss\n", steps);
  std::vector<Run> runs;
  const Stream stream;
  // Compiled in each precision, and bf16 and f16 eagerly as well: the same recipe on the tape.
  const std::vector<std::pair<std::string, bool>> plan{
      {"tf32", true}, {"bf16", true}, {"bf16", false}, {"f16", false}, {"f16", true}};
  for (const auto& [p, compiled] : plan) {
    runs.push_back(train(d, p, steps, compiled, stream));
    const Run& r = runs.back();
    std::printf("  %-5s %-8s losses %.4f -> %.4f (mean of the last %d: %.4f), %.2f ms a step", p.c_str(), compiled ? "compiled" : "eager",
                r.losses.front(), r.losses.back(), kTail, tail_mean(r.losses), r.ms);
    if (p == "f16")
      std::printf("; overflow injected at step %d: %d step(s) skipped, loss scale %g -> %g", steps / 2, r.skipped,
                  r.scale_before, r.scale_after);
    std::printf("\n");
  }
  const double f32_final = tail_mean(runs[0].losses);
  Json out = Json::object();
  out.set("model", "gpt2_small");
  out.set("steps", steps);
  Json rows = Json::array();
  for (const Run& r : runs) {
    Json j = Json::object();
    j.set("precision", r.precision);
    j.set("compiled", r.compiled);
    Json curve = Json::array();
    for (size_t i = 0; i < r.losses.size(); i += 10) curve.push(r.losses[i]);
    curve.push(r.losses.back());
    j.set("losses_every_10", curve);
    j.set("final_loss_mean_last_10", tail_mean(r.losses));
    j.set("rel_diff_to_tf32", std::abs(tail_mean(r.losses) - f32_final) / f32_final);
    j.set("step_ms_with_sync", r.ms);
    if (r.precision == "f16") {
      j.set("overflow_injected_at", steps / 2);
      j.set("skipped_steps", r.skipped);
      j.set("scale_before_overflow", r.scale_before);
      j.set("scale_after_overflow", r.scale_after);
    }
    rows.push(j);
    std::printf("  %-5s %-8s final %.4f, %.2f%% from tf32's\n", r.precision.c_str(), r.compiled ? "compiled" : "eager",
                tail_mean(r.losses),
                100 * std::abs(tail_mean(r.losses) - f32_final) / f32_final);
  }
  out.set("runs", rows);
  return out;
}

}  // namespace kiln::bench
