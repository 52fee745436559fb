// nn modules and optimizers: parameter registration and names, train/eval, layer outputs
// against references, one SGD and one AdamW step against the formulas in double, and an MLP
// that fits a known function with AdamW.
#include <cmath>

#include "support/reference.h"

using namespace kiln;
using namespace kiln::test;

BOOST_AUTO_TEST_CASE(modules_register_named_parameters) {
  manual_seed(1);
  nn::Sequential model({std::make_shared<nn::Linear>(3, 4), std::make_shared<nn::ReLU>(),
                        std::make_shared<nn::Linear>(4, 2, /*bias=*/false), std::make_shared<nn::LayerNorm>(2)});
  std::vector<std::string> names;
  for (auto& [name, t] : model.named_parameters()) {
    names.push_back(name);
    BOOST_TEST(t.requires_grad());
    BOOST_TEST(t.is_leaf());
  }
  BOOST_TEST(names == std::vector<std::string>({"0.weight", "0.bias", "2.weight", "3.weight", "3.bias"}),
             boost::test_tools::per_element());
  BOOST_TEST(model.is_training());
  model.eval();
  BOOST_TEST(!model.is_training());
  nn::MLP mlp({4, 8, 8, 1});
  BOOST_TEST(mlp.parameters().size() == 6u);
  check_error([] { nn::Linear bad(0, 3); }, {"nn::Linear", "positive"});
}

BOOST_AUTO_TEST_CASE(linear_and_embedding_match_references) {
  manual_seed(2);
  nn::Linear lin(5, 3);
  Tensor x = random_tensor({4, 5}, f32, 3);
  std::vector<double> xv = host_values(x), w = host_values(lin.weight), b = host_values(lin.bias), want;
  for (int i = 0; i < 4; ++i)
    for (int o = 0; o < 3; ++o) {
      double acc = b[o];
      for (int k = 0; k < 5; ++k) acc += xv[i * 5 + k] * w[o * 5 + k];
      want.push_back(acc);
    }
  check_close(lin.forward(x), want, {4, 3}, {1e-5, 1e-5}, "linear");
  for (double v : w) BOOST_TEST(std::abs(v) <= 1 / std::sqrt(5.0));
  nn::Embedding emb(10, 4);
  Tensor rows = emb.forward(from_vector<int64_t>({7, 2}));
  std::vector<double> table = host_values(emb.weight), got_want;
  for (int64_t r : {7, 2})
    for (int c = 0; c < 4; ++c) got_want.push_back(table[r * 4 + c]);
  check_close(rows, got_want, {2, 4}, {0, 0}, "embedding");
}

BOOST_AUTO_TEST_CASE(sgd_step_matches_the_formula) {
  Tensor p = random_tensor({5}, f64, 4).requires_grad_();
  std::vector<double> p0 = host_values(p), v(5, 0.0);
  optim::SGD opt({p}, {.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01});
  for (int step = 0; step < 3; ++step) {
    std::vector<double> pv = host_values(p);
    (square(p) * 0.5).sum().backward();  // grad = p
    opt.step();
    opt.zero_grad();
    BOOST_TEST(!p.grad().defined());
    for (int i = 0; i < 5; ++i) {
      double g = pv[i] + 0.01 * pv[i];
      v[i] = step == 0 ? g : 0.9 * v[i] + g;
      p0[i] = pv[i] - 0.1 * v[i];
    }
    check_close(p, p0, {5}, "sgd step " + std::to_string(step));
  }
  BOOST_TEST(p.is_leaf());
}

// Three steps against the formulas in double: the fused kernel (default) and the composite ops
// (fused = false, what a compiled step traces), f64 and f32, on a size that takes the kernel's
// parallel vector loop and a tail. The parameter keeps its storage (updated in place).
BOOST_AUTO_TEST_CASE(adamw_step_matches_the_formula) {
  const int64_t n = 40000 + 3;
  for (DType t : {f64, f32})
    for (bool fused : {true, false}) {
      Tensor p = random_tensor({n}, t, 5).requires_grad_();
      Tensor c = random_tensor({n}, t, 6);
      const void* storage = p.data_ptr();
      std::vector<double> pv = host_values(p), cv = host_values(c), m(size_t(n), 0), v(size_t(n), 0);
      optim::AdamW opt({p}, {.lr = 0.01, .beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8, .weight_decay = 0.1, .fused = fused});
      for (int step = 1; step <= 3; ++step) {
        (p * c).sum().backward();  // grad = c
        uint64_t version = p.storage()->version;
        opt.step();
        BOOST_TEST(p.storage()->version > version);  // written in place, as copy_ writes
        opt.zero_grad();
        for (size_t i = 0; i < size_t(n); ++i) {
          m[i] = 0.9 * m[i] + 0.1 * cv[i];
          v[i] = 0.99 * v[i] + 0.01 * cv[i] * cv[i];
          double mh = m[i] / (1 - std::pow(0.9, step)), vh = v[i] / (1 - std::pow(0.99, step));
          pv[i] = pv[i] * (1 - 0.01 * 0.1) - 0.01 * mh / (std::sqrt(vh) + 1e-8);
        }
        std::string what = std::string(name(t)) + (fused ? " fused" : " composite") + " adamw step " + std::to_string(step);
        check_close(p, pv, {n}, tolerance(t), what);
      }
      BOOST_TEST(p.data_ptr() == storage);
    }
}

BOOST_AUTO_TEST_CASE(optimizer_rejects_non_leaves) {
  Tensor p = random_tensor({2}, f32, 7).requires_grad_();
  check_error([&] { optim::SGD bad({p * 2.0}, {}); }, {"optimizer", "leaf"});
  check_error([&] { optim::AdamW bad({p}, {.beta1 = 1.5}); }, {"AdamW", "betas"});
}

BOOST_AUTO_TEST_CASE(mlp_module_fits_a_function_with_adamw) {
  manual_seed(11);
  nn::MLP model({1, 32, 32, 1});
  Tensor x = linspace(-2, 2, 96).unsqueeze(1);
  Tensor y = x * x * 0.5 - 1.0;
  optim::AdamW opt(model.parameters(), {.lr = 1e-2, .weight_decay = 0});
  float first = 0, last = 0;
  for (int step = 0; step < 250; ++step) {
    Tensor loss = mean(square(model.forward(x) - y));
    if (step == 0) first = loss.item<float>();
    last = loss.item<float>();
    loss.backward();
    opt.step();
    opt.zero_grad();
  }
  BOOST_TEST_MESSAGE("MLP loss " << first << " -> " << last);
  BOOST_TEST(last < 5e-3);
  BOOST_TEST(last < 0.02 * first);
}
