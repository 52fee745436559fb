// Autocast on the CPU (bf16 and f16 computed through f32 there): every op with an autocast rule
// follows it, calls under autocast equal the same calls on inputs cast by hand, pointwise ops
// promote, f64 and integer tensors are left alone, guards nest, gradients arrive in the
// parameters' dtype and stay close to the f32 ones, and bad use gives an error.
#include <cmath>
#include <map>

#include "support/reference.h"

using namespace kiln;
using namespace kiln::test;

namespace {

// One call of an op from float inputs of dtype t (integer inputs as the op needs them).
using Sample = std::function<Tensor(DType t)>;

// A sample call of every op whose OpDef has an autocast rule; the first test fails for an op
// given a rule without a sample here.
std::map<std::string, Sample> samples() {
  auto x = [](DType t, uint64_t seed, Shape s = {4, 8}) { return random_tensor(s, DType::f32, seed).to(t); };
  return {
      {"matmul", [=](DType t) { return matmul(x(t, 1), x(t, 2, {8, 3})); }},
      {"sum", [=](DType t) { return sum(x(t, 3), {1}); }},
      {"mean", [=](DType t) { return mean(x(t, 4)); }},
      {"var", [=](DType t) { return var(x(t, 5), {0}); }},
      {"logsumexp", [=](DType t) { return logsumexp(x(t, 6), {1}); }},
      {"softmax", [=](DType t) { return softmax(x(t, 7), -1); }},
      {"log_softmax", [=](DType t) { return log_softmax(x(t, 8), 0); }},
      {"layer_norm", [=](DType t) { return layer_norm(x(t, 9), {8}, x(t, 10, {8}), x(t, 11, {8})); }},
      {"cross_entropy", [=](DType t) { return cross_entropy(x(t, 12), from_vector<int64_t>({1, 7, 0, 3})); }},
  };
}

DType output_dtype(AutocastRule rule, DType lower) { return rule == AutocastRule::f32 ? DType::f32 : lower; }

}  // namespace

BOOST_AUTO_TEST_CASE(every_op_with_an_autocast_rule_follows_it) {
  std::map<std::string, Sample> calls = samples();
  int ruled = 0;
  for (const OpDef* def : all_op_defs()) {
    if (def->autocast == AutocastRule::none || !def->differentiable) continue;  // backward-only ops: none
    ++ruled;
    BOOST_TEST_CONTEXT("op " << def->name) {
      auto it = calls.find(def->name);
      BOOST_TEST_REQUIRE((it != calls.end()), "no sample call of " << def->name << " in this test");
      for (DType lower : {DType::bf16, DType::f16}) {
        Tensor auto_cast, by_hand;
        {
          AutocastGuard ac(Device::cpu(), lower);
          auto_cast = it->second(DType::f32);
          BOOST_TEST(auto_cast.dtype() == output_dtype(def->autocast, lower));
          Tensor from_lower = it->second(lower);  // 16-bit inputs: f32-rule ops widen them
          BOOST_TEST(from_lower.dtype() == output_dtype(def->autocast, lower));
          Tensor f64 = it->second(DType::f64);  // never cast
          BOOST_TEST(f64.dtype() == DType::f64);
        }
        // Autocast is the casts its rule names, nothing else: the same values bit for bit.
        by_hand = it->second(def->autocast == AutocastRule::f32 ? DType::f32 : lower);
        check_close(auto_cast, host_values(by_hand), by_hand.shape(), {0, 0}, def->name + " by hand");
      }
    }
  }
  BOOST_TEST(ruled == int(calls.size()), "ops with a rule: " << ruled << ", samples: " << calls.size());
}

BOOST_AUTO_TEST_CASE(pointwise_ops_promote_and_other_ops_keep_their_inputs) {
  Tensor a = random_tensor({3, 5}, DType::f32, 20), b = random_tensor({3, 5}, DType::f32, 21);
  AutocastGuard ac(Device::cpu(), DType::bf16);
  Tensor h = matmul(a, b.t());
  BOOST_TEST(h.dtype() == DType::bf16);
  BOOST_TEST(add(h, a.sum({1}, true)).dtype() == DType::f32);  // bf16 + f32: the widest
  BOOST_TEST(gelu(h).dtype() == DType::bf16);
  BOOST_TEST((h * 2.0).dtype() == DType::bf16);
  BOOST_TEST(max(h, {1}).dtype() == DType::bf16);  // exact in any dtype: no rule
  BOOST_TEST(exp(a).dtype() == DType::f32);
  Tensor idx = from_vector<int64_t>({2, 0, 1});
  nn::Embedding emb(4, 6);
  BOOST_TEST(emb.forward(idx).dtype() == DType::f32);
  Tensor i32 = from_vector<int32_t>({1, 2, 3, 4}, {2, 2});
  BOOST_TEST(sum(i32).dtype() == sum(i32.to(DType::i64)).dtype());  // integers are never cast
}

// linear in bf16 against plain loops in double over the bf16-rounded x, weight and bias, with
// the f32 accumulation rounded to bf16 once at the end.
BOOST_AUTO_TEST_CASE(linear_runs_in_the_lower_dtype_bias_included) {
  manual_seed(5);
  nn::Linear lin(24, 7);
  Tensor x = random_tensor({6, 24}, DType::f32, 22);
  Tensor y;
  {
    AutocastGuard ac(Device::cpu(), DType::bf16);
    y = lin.forward(x);
  }
  BOOST_TEST(y.dtype() == DType::bf16);
  BOOST_TEST(lin.weight.dtype() == DType::f32);  // master weights stay f32
  std::vector<double> xv = host_values(x.to(DType::bf16)), w = host_values(lin.weight.to(DType::bf16)),
                      b = host_values(lin.bias.to(DType::bf16)), want;
  for (int i = 0; i < 6; ++i)
    for (int o = 0; o < 7; ++o) {
      double acc = 0;
      for (int k = 0; k < 24; ++k) acc += xv[size_t(i * 24 + k)] * w[size_t(o * 24 + k)];
      want.push_back(acc + b[size_t(o)]);
    }
  check_close(y, want, {6, 7}, {1e-2, 1e-2}, "linear under bf16 autocast");
}

BOOST_AUTO_TEST_CASE(guards_nest_restore_and_keep_devices_apart) {
  BOOST_TEST(autocast_states().str() == "off");
  {
    AutocastGuard outer(Device::cpu(), DType::bf16);
    BOOST_TEST(autocast_states().str() == "cpu bf16");
    {
      AutocastGuard inner(Device::cpu(), DType::f16);
      BOOST_TEST(autocast_states().str() == "cpu f16");
      AutocastGuard off(Device::cpu(), DType::bf16, /*enabled=*/false);
      BOOST_TEST(matmul(random_tensor({2, 2}, DType::f32, 1), random_tensor({2, 2}, DType::f32, 2)).dtype() ==
                 DType::f32);
    }
    BOOST_TEST(autocast_states().str() == "cpu bf16");
    {
      AutocastSuspended none;
      BOOST_TEST(autocast_states().str() == "off");
    }
    AutocastGuard cuda(Device::cuda(), DType::f16);  // only the state: no CUDA tensor is made
    BOOST_TEST(autocast_states().str() == "cpu bf16, cuda f16");
  }
  BOOST_TEST(autocast_states().str() == "off");
  {
    AutocastGuard cuda_only(Device::cuda(), DType::bf16);
    Tensor a = random_tensor({2, 3}, DType::f32, 3);
    BOOST_TEST(matmul(a, a.t()).dtype() == DType::f32);  // CPU tensors: CPU autocast is off
  }
  check_error([] { AutocastGuard bad(Device::cpu(), DType::f32); }, {"AutocastGuard", "bf16 or f16", "f32"});
}

// A small MLP with a cross-entropy loss: forward under autocast, backward after it. The
// gradients are f32 like the parameters, and within bf16's precision of the f32 run's.
BOOST_AUTO_TEST_CASE(gradients_arrive_in_the_parameters_dtype) {
  manual_seed(9);
  nn::MLP mlp({32, 64, 10});
  Tensor x = random_tensor({16, 32}, DType::f32, 30);
  Tensor y = from_vector<int64_t>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1, 2, 3, 4, 5});
  cross_entropy(mlp.forward(x), y).backward();
  std::vector<std::vector<double>> f32_grads;
  for (const Tensor& p : mlp.parameters()) f32_grads.push_back(host_values(p.grad()));
  for (const Tensor& p : mlp.parameters()) p.set_grad(Tensor());

  Tensor loss;
  {
    AutocastGuard ac(Device::cpu(), DType::bf16);
    loss = cross_entropy(mlp.forward(x), y);
  }
  BOOST_TEST(loss.dtype() == DType::f32);
  loss.backward();
  std::vector<Tensor> params = mlp.parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    BOOST_TEST_REQUIRE(params[i].grad().defined());
    BOOST_TEST(params[i].grad().dtype() == DType::f32);
    std::vector<double> g = host_values(params[i].grad());
    double diff = 0, norm = 0;
    for (size_t k = 0; k < g.size(); ++k) {
      diff += (g[k] - f32_grads[i][k]) * (g[k] - f32_grads[i][k]);
      norm += f32_grads[i][k] * f32_grads[i][k];
    }
    BOOST_TEST(std::sqrt(diff / norm) < 3e-2, "parameter " << i << ": relative L2 " << std::sqrt(diff / norm));
  }
}

BOOST_AUTO_TEST_CASE(attention_under_autocast_runs_in_the_lower_dtype) {
  Tensor q = random_tensor({2, 3, 5, 8}, DType::f32, 40), k = random_tensor({2, 3, 5, 8}, DType::f32, 41),
         v = random_tensor({2, 3, 5, 8}, DType::f32, 42);
  Tensor got;
  {
    AutocastGuard ac(Device::cpu(), DType::bf16);
    got = scaled_dot_product_attention(q, k, v, /*causal=*/true);
  }
  BOOST_TEST(got.dtype() == DType::bf16);
  Tensor want = scaled_dot_product_attention(q, k, v, true);
  check_close(got, host_values(want), want.shape(), {3e-2, 3e-2}, "attention in bf16 against f32");
}
