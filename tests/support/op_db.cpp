#include "support/op_db.h"

#include <cmath>

#include "support/reference.h"

namespace kiln::test {

namespace {

double sigmoid_ref(double x) { return 1 / (1 + std::exp(-x)); }

}  // namespace

const std::vector<UnaryOpEntry>& unary_op_db() {
  using T = const Tensor&;
  static const std::vector<UnaryOpEntry> db = {
      {"neg", "neg", [](T x) { return neg(x); }, [](double x) { return -x; }, -3, 3, -2, 2, true},
      {"abs", "abs", [](T x) { return abs(x); }, [](double x) { return std::abs(x); }, -3, 3, 0.1, 2, true},
      {"square", "square", [](T x) { return square(x); }, [](double x) { return x * x; }, -3, 3, -2, 2, true},
      {"relu", "relu", [](T x) { return relu(x); }, [](double x) { return x > 0 ? x : 0; }, -3, 3, 0.1, 2, true},
      {"exp", "exp", [](T x) { return exp(x); }, [](double x) { return std::exp(x); }, -4, 4, -2, 2},
      {"log", "log", [](T x) { return log(x); }, [](double x) { return std::log(x); }, 0.01, 5, 0.2, 3},
      {"sqrt", "sqrt", [](T x) { return sqrt(x); }, [](double x) { return std::sqrt(x); }, 0, 5, 0.2, 3},
      {"rsqrt", "rsqrt", [](T x) { return rsqrt(x); }, [](double x) { return 1 / std::sqrt(x); }, 0.05, 5, 0.2, 3},
      {"sin", "sin", [](T x) { return sin(x); }, [](double x) { return std::sin(x); }, -6, 6, -3, 3},
      {"cos", "cos", [](T x) { return cos(x); }, [](double x) { return std::cos(x); }, -6, 6, -3, 3},
      {"tanh", "tanh", [](T x) { return tanh(x); }, [](double x) { return std::tanh(x); }, -4, 4, -2, 2},
      {"sigmoid", "sigmoid", [](T x) { return sigmoid(x); }, sigmoid_ref, -8, 8, -3, 3},
      {"silu", "silu", [](T x) { return silu(x); }, [](double x) { return x * sigmoid_ref(x); }, -8, 8, -3, 3},
      {"reciprocal", "reciprocal", [](T x) { return reciprocal(x); }, [](double x) { return 1 / x; }, 0.1, 4, 0.3, 3},
      {"softplus", "softplus", [](T x) { return softplus(x); }, [](double x) { return std::log1p(std::exp(x)); }, -30, 30,
       -3, 3},
      {"gelu", "gelu", [](T x) { return gelu(x); }, [](double x) { return gelu_reference(x, "none"); }, -5, 5, -3, 3,
       false, 1e-6},
      {"gelu", "gelu_tanh", [](T x) { return gelu(x, "tanh"); }, [](double x) { return gelu_reference(x, "tanh"); }, -5,
       5, -3, 3},
  };
  return db;
}

}  // namespace kiln::test
