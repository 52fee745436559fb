// The model zoo at test size: every model builds, runs on fresh random inputs and gives finite
// outputs of the expected shapes; the mlp matches a double-precision reference loop; unknown
// names are errors that list the known models.
#include <algorithm>
#include <cmath>
#include <map>

#include "bench/zoo.h"
#include "support/reference.h"

using namespace kiln;
using namespace kiln::test;

namespace {

const std::map<std::string, Shape> kOutputShapes = {
    {"mlp", {8, 64}}, {"transformer_block", {2, 16, 32}}, {"norm_softmax", {32, 64}}, {"tiny_gpt", {4, 16, 11}}};

// Linear -> GELU (erf) -> Linear -> LayerNorm over rows of x, in double.
std::vector<double> mlp_reference(const std::vector<double>& x, int64_t rows,
                                  std::map<std::string, std::vector<double>>& p, int64_t width, int64_t hidden) {
  auto linear = [](const std::vector<double>& in, const std::vector<double>& w, const std::vector<double>& b,
                   int64_t n_in, int64_t n_out) {
    std::vector<double> out(static_cast<size_t>(n_out));
    for (int64_t o = 0; o < n_out; ++o) {
      double acc = b[size_t(o)];
      for (int64_t k = 0; k < n_in; ++k) acc += in[size_t(k)] * w[size_t(o * n_in + k)];
      out[size_t(o)] = acc;
    }
    return out;
  };
  std::vector<double> want;
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<double> row(x.begin() + r * width, x.begin() + (r + 1) * width);
    std::vector<double> h = linear(row, p["0.weight"], p["0.bias"], width, hidden);
    for (double& v : h) v = 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
    std::vector<double> y = linear(h, p["2.weight"], p["2.bias"], hidden, width);
    double mean = 0, var = 0;
    for (double v : y) mean += v / double(width);
    for (double v : y) var += (v - mean) * (v - mean) / double(width);
    for (int64_t i = 0; i < width; ++i)
      want.push_back((y[size_t(i)] - mean) / std::sqrt(var + 1e-5) * p["3.weight"][size_t(i)] +
                     p["3.bias"][size_t(i)]);
  }
  return want;
}

}  // namespace

BOOST_AUTO_TEST_CASE(every_model_runs_with_finite_outputs_of_the_expected_shape) {
  manual_seed(11);
  BOOST_TEST(zoo::zoo_names().size() == kOutputShapes.size());
  for (const std::string& name : zoo::zoo_names()) {
    BOOST_TEST_CONTEXT(name) {
      zoo::ZooModel m = zoo::make_zoo_model(name, zoo::ZooSize::test);
      BOOST_TEST(m.name == name);
      BOOST_TEST(!m.description.empty());
      BOOST_TEST(!m.module->is_training());
      BOOST_TEST(!m.module->parameters().empty());
      TensorList in = m.make_inputs(), again = m.make_inputs();
      BOOST_TEST_REQUIRE(in.size() == 1u);
      BOOST_TEST((in[0].dtype() == (name == "tiny_gpt" ? DType::i64 : f32)));
      BOOST_TEST(host_values(in[0]) != host_values(again[0]));  // fresh random inputs each call
      TensorList out = m.forward(in);
      BOOST_TEST_REQUIRE(out.size() == 1u);
      BOOST_TEST(to_string(out[0].shape()) == to_string(kOutputShapes.at(name)));
      std::vector<double> v = host_values(out[0]);
      BOOST_TEST(std::all_of(v.begin(), v.end(), [](double e) { return std::isfinite(e); }));
    }
  }
}

BOOST_AUTO_TEST_CASE(norm_softmax_rows_are_log_probabilities) {
  manual_seed(12);
  zoo::ZooModel m = zoo::make_zoo_model("norm_softmax", zoo::ZooSize::test);
  std::vector<double> v = host_values(m.forward(m.make_inputs())[0]);
  for (size_t r = 0; r < 32; ++r) {
    double total = 0;
    for (size_t i = 0; i < 64; ++i) total += std::exp(v[r * 64 + i]);
    BOOST_TEST(std::abs(total - 1) < 1e-5);
  }
}

BOOST_AUTO_TEST_CASE(mlp_matches_a_double_reference) {
  manual_seed(13);
  zoo::ZooModel m = zoo::make_zoo_model("mlp", zoo::ZooSize::test);
  std::map<std::string, std::vector<double>> p;
  for (auto& [name, t] : m.module->named_parameters()) {
    if (name.rfind("3.", 0) == 0) t.detach().copy_(randn(t.shape()));  // a LayerNorm that is not the identity
    p[name] = t.to_vector<double>();
  }
  BOOST_TEST_REQUIRE(p.size() == 6u);
  Tensor x = m.make_inputs()[0];
  check_close(m.forward({x})[0], mlp_reference(x.to_vector<double>(), 8, p, 64, 256), {8, 64}, {1e-4, 1e-4},
              "mlp");
}

BOOST_AUTO_TEST_CASE(unknown_names_list_the_known_models) {
  check_error([] { zoo::make_zoo_model("resnet", zoo::ZooSize::test); },
              {"resnet", "mlp", "transformer_block", "norm_softmax", "tiny_gpt"});
}
