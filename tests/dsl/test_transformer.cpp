// Transformer modules: shapes, causality (a later token never changes earlier outputs), the
// attention output against a plain double reference, and gradients reaching every parameter.
#include <cmath>

#include "support/reference.h"

using namespace kiln;
using namespace kiln::test;

BOOST_AUTO_TEST_CASE(gpt_shapes_and_causality) {
  manual_seed(3);
  nn::TinyGpt gpt({.vocab = 7, .seq = 6, .width = 16, .heads = 2, .layers = 2});
  Tensor a = from_vector<int64_t>({1, 2, 3, 4, 5, 6, 0, 1, 2, 3, 4, 5}, {2, 6});
  Tensor b = from_vector<int64_t>({1, 2, 3, 4, 5, 0, 0, 1, 2, 3, 4, 6}, {2, 6});  // differ at the last token
  Tensor la = gpt.forward(a), lb = gpt.forward(b);
  BOOST_TEST(to_string(la.shape()) == "[2, 6, 7]");
  check_close(lb.narrow(1, 0, 5), host_values(la.narrow(1, 0, 5)), {2, 5, 7}, {1e-6, 1e-6}, "earlier positions");
  std::vector<double> last_a = host_values(la.narrow(1, 5, 1)), last_b = host_values(lb.narrow(1, 5, 1));
  double diff = 0;
  for (size_t i = 0; i < last_a.size(); ++i) diff += std::abs(last_a[i] - last_b[i]);
  BOOST_TEST(diff > 1e-4);  // the changed position itself does change
  check_error([&] { gpt.forward(from_vector<int64_t>(std::vector<int64_t>(7, 0), {1, 7})); }, {"TinyGpt", "[1, 7]"});
}

BOOST_AUTO_TEST_CASE(attention_matches_a_double_reference) {
  manual_seed(4);
  const int64_t B = 1, T = 4, C = 4, H = 2, D = 2;
  nn::CausalSelfAttention attn(C, H);
  Tensor x = random_tensor({B, T, C}, f32, 5);
  std::vector<std::pair<std::string, Tensor>> p = attn.named_parameters();  // qkv.weight, qkv.bias, proj.*
  std::vector<double> xv = host_values(x), wq = host_values(p[0].second), bq = host_values(p[1].second),
                      wp = host_values(p[2].second), bp = host_values(p[3].second);
  std::vector<double> qkv(T * 3 * C), y(T * C, 0.0), want;
  for (int t = 0; t < T; ++t)
    for (int o = 0; o < 3 * C; ++o) {
      double acc = bq[o];
      for (int k = 0; k < C; ++k) acc += xv[t * C + k] * wq[o * C + k];
      qkv[t * 3 * C + o] = acc;
    }
  for (int h = 0; h < H; ++h)
    for (int t = 0; t < T; ++t) {
      std::vector<double> s;
      double mx = -1e300, z = 0;
      for (int u = 0; u <= t; ++u) {
        double dot = 0;
        for (int d = 0; d < D; ++d) dot += qkv[t * 3 * C + h * D + d] * qkv[u * 3 * C + C + h * D + d];
        s.push_back(dot / std::sqrt(double(D)));
        mx = std::max(mx, s.back());
      }
      for (double& e : s) z += (e = std::exp(e - mx));
      for (int u = 0; u <= t; ++u)
        for (int d = 0; d < D; ++d) y[t * C + h * D + d] += s[u] / z * qkv[u * 3 * C + 2 * C + h * D + d];
    }
  for (int t = 0; t < T; ++t)
    for (int o = 0; o < C; ++o) {
      double acc = bp[o];
      for (int k = 0; k < C; ++k) acc += y[t * C + k] * wp[o * C + k];
      want.push_back(acc);
    }
  check_close(attn.forward(x), want, {B, T, C}, {1e-5, 1e-5}, "causal self-attention");
}

BOOST_AUTO_TEST_CASE(gradients_reach_every_parameter) {
  manual_seed(6);
  nn::TinyGpt gpt({.vocab = 5, .seq = 4, .width = 8, .heads = 2, .layers = 1});
  Tensor tokens = from_vector<int64_t>({0, 1, 2, 3, 4, 3, 2, 1}, {2, 4});
  Tensor loss = cross_entropy(gpt.forward(tokens).reshape({-1, 5}), from_vector<int64_t>({1, 2, 3, 4, 3, 2, 1, 0}));
  loss.backward();
  for (auto& [name, t] : gpt.named_parameters()) {
    BOOST_TEST_CONTEXT(name) {
      BOOST_TEST_REQUIRE(t.grad().defined());
      BOOST_TEST(t.grad().shape() == t.shape());
      double norm = 0;
      for (double v : host_values(t.grad())) norm += v * v;
      BOOST_TEST(norm > 0);
    }
  }
}
