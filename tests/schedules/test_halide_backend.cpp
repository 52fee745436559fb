// The "halide" backend against eager execution: fused pointwise chains with broadcasting and
// dtype conversions, reductions, row ops, views as index arithmetic, creation ops, eager steps
// (matmul, random) between regions, symbolic sizes, every zoo model, Halide's autoschedulers, and
// the fallback to "eager" for graphs that autograd must record.
#include <array>
#include <cmath>
#include <filesystem>
#include <unistd.h>

#include "bench/zoo.h"
#include "support/reference.h"

using namespace kiln;
using namespace kiln::test;

namespace {

CompileOptions halide() { return {.backend = "halide"}; }

void check_same(const Tensor& got, const Tensor& want, const std::string& what) {
  check_close(got, host_values(want), want.shape(), what);
}

}  // namespace

BOOST_AUTO_TEST_CASE(pointwise_chains_with_broadcasting_and_dtypes) {
  auto fn = [](const Tensor& a, const Tensor& b, const Tensor& c) {
    Tensor x = gelu(a * b + 1.5) - tanh(c);                 // [4, 5] * [5] + ..., c [4, 1]
    Tensor y = where(gt(x, 0.0), exp(-x), sigmoid(x)) * 2.0;
    return std::make_tuple(y, (y.to(f16) * 3.0).to(f32), relu(a).to(f64) + 1.0, lt(a, b));
  };
  auto f = compile(fn, halide());
  for (int call = 0; call < 2; ++call) {
    Tensor a = random_tensor({4, 5}, f32, 1 + call), b = random_tensor({5}, f32, 3 + call),
           c = random_tensor({4, 1}, f32, 5 + call);
    auto [y, z, w, m] = f(a, b, c);
    auto [ey, ez, ew, em] = fn(a, b, c);
    check_same(y, ey, "chain");
    check_close(z, host_values(ez), {4, 5}, tolerance(f16), "through f16");
    check_same(w, ew, "to f64");
    check_same(m, em, "comparison");
  }
}

BOOST_AUTO_TEST_CASE(reductions_and_row_ops) {
  Tensor w = random_tensor({16}, f32, 1), bias = random_tensor({16}, f32, 2);
  auto fn = [&](const Tensor& x) {
    Tensor h = layer_norm(x * 2.0, {16}, w, bias);
    return std::vector<Tensor>{softmax(h, -1), log_softmax(h, 0), h.sum({1}), h.mean({0}, true),
                               h.max({1}), h.var({1}), logsumexp(h, {1}), argmax(h, 1), h.sum()};
  };
  auto f = compile(fn, halide());
  Tensor x = random_tensor({6, 16}, f32, 3);
  std::vector<Tensor> got = f(x), want = fn(x);
  for (size_t i = 0; i < want.size(); ++i) check_same(got[i], want[i], "output " + std::to_string(i));
}

BOOST_AUTO_TEST_CASE(views_are_index_arithmetic) {
  auto fn = [](const Tensor& x) {
    Tensor t = x.transpose(0, 2) * 1.0;                      // [4, 3, 2]
    Tensor s = x.slice(2, 1, 4, 2) + 1.0;                    // [2, 3, 2]
    Tensor r = x.reshape({6, -1}).unsqueeze(0).expand({3, 6, 4}) * 2.0;
    Tensor p = x.permute({1, 2, 0}).flatten(1).unflatten(1, {2, 4}) - 1.0;
    Tensor q = x.narrow(1, 1, 2).squeeze() * 3.0;  // nothing to squeeze: [2, 2, 4]
    return std::vector<Tensor>{t, s, r, p, q, x.transpose(1, 2)};
  };
  auto f = compile(fn, halide());
  Tensor x = random_tensor({2, 3, 4}, f32, 1);
  std::vector<Tensor> got = f(x), want = fn(x);
  for (size_t i = 0; i < want.size(); ++i) check_same(got[i], want[i], "view " + std::to_string(i));
  Tensor xt = random_view({2, 3, 4}, f32, 2, "transposed");  // a strided input
  got = f(xt);
  want = fn(xt);
  for (size_t i = 0; i < want.size(); ++i) check_same(got[i], want[i], "strided input, view " + std::to_string(i));
}

BOOST_AUTO_TEST_CASE(eager_steps_between_regions) {
  Tensor w = random_tensor({8, 8}, f32, 1);
  auto fn = [&](const Tensor& x) {
    Tensor h = gelu(matmul(x * 0.5, w) + arange(8.0) * 0.1);
    Tensor noise = rand_like(h);  // a random draw: runs eagerly, between two regions
    return softmax(h + noise, -1) + full({8}, 2.0);
  };
  auto f = compile(fn, halide());
  Tensor x = random_tensor({5, 8}, f32, 2);
  manual_seed(3);
  Tensor got = f(x);
  manual_seed(3);
  check_same(got, fn(x), "matmul and rand_like between regions");
}

// Ranges made inside regions, against eager: an arange, a linspace (its last element exactly
// `end`), a fill, and an arange of indices in a region of its own. (An arange with a select on its
// last index broke Halide 14's loop partitioning in AVX2 code, 8 lanes over 96 elements split by
// 64: the installed package's AOT training step catches that, tests/install/.)
BOOST_AUTO_TEST_CASE(ranges_inside_vectorized_regions) {
  auto fn = [](const Tensor& x) {
    Tensor positions = arange(0, 96, 1, {.dtype = DType::i64});  // a region of its own (embedding indices)
    return std::make_tuple(x * 2.0 + arange(96.0) * 0.5, x - linspace(-1.0, 3.0, 96), full({3, 96}, 0.25) * x,
                           embedding(x.t(), positions));
  };
  auto f = compile(fn, halide());
  Tensor x = random_tensor({3, 96}, f32, 4);
  auto [a, b, c, d] = f(x);
  auto [ea, eb, ec, ed] = fn(x);
  check_same(a, ea, "arange");
  check_same(b, eb, "linspace");
  check_same(c, ec, "full");
  check_same(d, ed, "arange as indices");
}

BOOST_AUTO_TEST_CASE(packed_weights_follow_in_place_updates) {
  NoGradGuard no_grad;
  Tensor w = random_tensor({48, 40}, f32, 1);  // read as w.t(): packed once per version
  auto f = compile([&](const Tensor& x) { return matmul(x, w.t()); }, halide());
  Tensor x = random_tensor({16, 40}, f32, 2);
  check_close(f(x), linear_reference(x, w, Tensor()), {16, 48}, "first call");
  check_close(f(x), linear_reference(x, w, Tensor()), {16, 48}, "packed copy reused");
  w.copy_(random_tensor({48, 40}, f32, 3));  // an optimizer step writes in place
  check_close(f(x), linear_reference(x, w, Tensor()), {16, 48}, "after copy_");
  w.slice(0, 0, 8).copy_(random_tensor({8, 40}, f32, 4));  // a write through a view of it
  check_close(f(x), linear_reference(x, w, Tensor()), {16, 48}, "after a write through a view");
  BOOST_TEST(f.stats().compiles == 1);
}

// A GEMM's epilogue that adds a reduction (a bias made by a column sum): the reduction is stored
// by its own loop, not computed inside the GEMM's epilogue (which the CPU GEMM schedule does not
// allow; a reduction once moved there when its result was only reshaped or added).
BOOST_AUTO_TEST_CASE(gemm_epilogue_adds_a_reduction) {
  NoGradGuard no_grad;
  Tensor w = random_tensor({64, 40}, f32, 5), y = random_tensor({12, 64}, f32, 6);
  auto fn = [&](const Tensor& x) { return matmul(x, w.t()) + y.sum({0}); };
  auto f = compile(fn, halide());
  Tensor x = random_tensor({16, 40}, f32, 7);
  std::vector<double> want = linear_reference(x, w, Tensor()), bias(64, 0.0), yv = host_values(y);
  for (size_t i = 0; i < yv.size(); ++i) bias[i % 64] += yv[i];
  for (size_t i = 0; i < want.size(); ++i) want[i] += bias[i % 64];
  check_close(f(x), want, {16, 64}, "x w^T + sum(y, 0)");
}

// f32 sums of k products of values in [-2, 2]: rounding grows with k.
Tolerance gemm_tolerance(int64_t k) { return {2e-6 * double(k), 1e-6 * double(k)}; }

// gelu(x @ w.t() + bias) in double (exact erf GELU).
std::vector<double> linear_gelu_reference(const Tensor& x, const Tensor& w, const Tensor& bias) {
  std::vector<double> y = linear_reference(x, w, bias);
  for (double& v : y) v = gelu_reference(v, "none");
  return y;
}

BOOST_AUTO_TEST_CASE(gemm_in_a_pipeline_with_its_epilogue) {
  NoGradGuard no_grad;
  // Shapes around the GEMM's tiles: 8 rows by 32 columns, with tails in M, N and K.
  for (auto [m, k, n] : std::vector<std::array<int64_t, 3>>{{16, 64, 64}, {13, 37, 40}, {3, 5, 33}, {70, 130, 97}}) {
    BOOST_TEST_CONTEXT("m " << m << " k " << k << " n " << n) {
      Tensor w = random_tensor({n, k}, f32, uint64_t(m + k)), bias = random_tensor({n}, f32, uint64_t(n));
      auto fn = [&](const Tensor& x) { return gelu(matmul(x, w.t()) + bias); };
      auto f = compile(fn, halide());
      Tensor x = random_tensor({m, k}, f32, uint64_t(m * k));
      check_close(f(x), linear_gelu_reference(x, w, bias), {m, n}, gemm_tolerance(k), "fused GEMM");
      BOOST_TEST(f.stats().kernels == 1);  // matmul, bias and gelu in one pipeline
    }
  }
  // A dynamic number of rows: one compile, any M.
  Tensor w = random_tensor({48, 24}, f32, 5), bias = random_tensor({48}, f32, 6);
  auto fn = [&](const Tensor& x) { return gelu(matmul(x * 2.0, w.t()) + bias); };
  auto f = compile(fn, {.backend = "halide", .dynamic = true});
  for (int64_t m : {9, 2, 31}) {
    Tensor x = random_tensor({m, 24}, f32, uint64_t(m));
    check_close(f(x), linear_gelu_reference(x * 2.0, w, bias), {m, 48}, gemm_tolerance(24),
                "dynamic M = " + std::to_string(m));
  }
  BOOST_TEST(f.stats().compiles == 1);  // only K is fixed (the weight's), M stays symbolic
}

BOOST_AUTO_TEST_CASE(transposing_regions_in_tiles) {
  // Tiles of 64 or 128 of 8 x 8 blocks, shifted inwards at the edges: sizes with and without tails.
  for (auto [r, c] : std::vector<std::array<int64_t, 2>>{{128, 64}, {67, 130}, {200, 71}, {300, 257}}) {
    BOOST_TEST_CONTEXT(r << " x " << c) {
      Tensor a = random_tensor({r, c}, f32, uint64_t(r)), b = random_tensor({c, r}, f32, uint64_t(c));
      auto f = compile([](const Tensor& x, const Tensor& y) { return std::make_tuple(x + y.t() * 2.0, x.t().contiguous()); },
                       halide());
      auto [sum, t] = f(a, b);
      std::vector<double> av = host_values(a), bv = host_values(b), want_sum, want_t;
      for (int64_t i = 0; i < r; ++i)
        for (int64_t j = 0; j < c; ++j) want_sum.push_back(av[size_t(i * c + j)] + 2 * bv[size_t(j * r + i)]);
      for (int64_t j = 0; j < c; ++j)
        for (int64_t i = 0; i < r; ++i) want_t.push_back(av[size_t(i * c + j)]);
      check_close(sum, want_sum, {r, c}, "x + y.t() * 2");
      check_close(t, want_t, {c, r}, "x.t().contiguous()");
    }
  }
}

BOOST_AUTO_TEST_CASE(permutes_cats_and_column_sums_of_larger_tensors) {
  // A permute whose innermost index follows an outer dim (tiles of that dim and the innermost), a
  // cat in whole chunks with a transposed piece (its chunks unrolled), a flatten read across its
  // layout, and column sums over outer dims (tasks over every outer index).
  auto fn = [](const Tensor& x, const Tensor& q, const Tensor& k) {
    Tensor moved = (x * 2.0).permute({2, 0, 1}).contiguous();                         // [136, 3, 130]
    Tensor pieces = cat({q, k.transpose(1, 2) * 1.0, q - 1.0}, 2);                    // [2, 160, 192]
    Tensor flat_t = (x + 1.0).flatten(0, 1).t().contiguous();                          // [136, 390]
    return std::make_tuple(moved, pieces, flat_t, pieces.sum({0, 1}), (x * x).sum({0}));
  };
  auto f = compile(fn, halide());
  Tensor x = random_tensor({3, 130, 136}, f32, 21), q = random_tensor({2, 160, 64}, f32, 22),
         k = random_tensor({2, 64, 160}, f32, 23);
  auto [moved, pieces, flat_t, col, col2] = f(x, q, k);
  auto [em, ep, ef, ec, ec2] = fn(x, q, k);
  check_same(moved, em, "x.permute(2, 0, 1)");
  check_same(pieces, ep, "cat(q, k^T, q - 1)");
  check_same(flat_t, ef, "x.flatten(0, 1).t()");
  check_same(col, ec, "sum over dims 0, 1");
  check_same(col2, ec2, "sum over dim 0");
}

BOOST_AUTO_TEST_CASE(symbolic_sizes_are_parameters) {
  auto fn = [](const Tensor& x, const Tensor& y) { return softmax(x + y, -1).flatten() * 2.0; };
  auto f = compile(fn, {.backend = "halide", .dynamic = true});
  for (int64_t n : {3, 7, 12}) {
    Tensor x = random_tensor({n, 5}, f32, uint64_t(n)), y = random_tensor({n, 5}, f32, uint64_t(n + 1));
    check_same(f(x, y), fn(x, y), "n = " + std::to_string(n));
  }
  BOOST_TEST(f.stats().compiles == 1);
}

BOOST_AUTO_TEST_CASE(zoo_models_on_the_halide_backend) {
  NoGradGuard no_grad;  // parameters require grad: with grad on, graphs run on "eager" (no compiled backward yet)
  for (const std::string& name : zoo::zoo_names()) {
    BOOST_TEST_CONTEXT("model " << name) {
      manual_seed(1);
      zoo::ZooModel m = zoo::make_zoo_model(name, zoo::ZooSize::test);
      auto f = compile([&](std::vector<Tensor> xs) { return m.forward(xs); }, halide());
      for (int call = 0; call < 2; ++call) {
        TensorList in = m.make_inputs();
        TensorList got = f(in), want = m.forward(in);
        for (size_t i = 0; i < want.size(); ++i) check_same(got[i], want[i], name);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(halide_autoschedulers_give_the_same_results) {
  NoGradGuard no_grad;
  for (std::string scheduler : {"mullapudi2016", "adams2019", "li2018"}) {
    // transformer_block with one of them only: the autoschedulers take seconds on it.
    for (std::string name : {"norm_softmax", "transformer_block"}) {
      if (name == "transformer_block" && scheduler != "mullapudi2016") continue;
      BOOST_TEST_CONTEXT("scheduler " << scheduler << ", model " << name) {
        manual_seed(1);
        zoo::ZooModel m = zoo::make_zoo_model(name, zoo::ZooSize::test);
        auto f = compile([&](std::vector<Tensor> xs) { return m.forward(xs); },
                         {.backend = "halide", .scheduler = scheduler});
        TensorList in = m.make_inputs();
        TensorList got = f(in), want = m.forward(in);
        for (size_t i = 0; i < want.size(); ++i) check_same(got[i], want[i], name);
      }
    }
  }
  check_error([] { compile([](const Tensor& x) { return x * 2.0; }, {.backend = "halide", .scheduler = "nope"}); },
              {"unknown scheduler", "nope", "adams2019"});
}

BOOST_AUTO_TEST_CASE(graphs_that_need_autograd_run_eagerly) {
  Tensor w = random_tensor({4, 4}, f32, 1).requires_grad_();
  auto f = compile([&](const Tensor& x) { return softmax(matmul(x, w), -1).sum(); }, halide());
  Tensor x = random_tensor({3, 4}, f32, 2);
  f(x).backward();  // the halide backend hands this graph to "eager", so the tape is recorded
  Tensor g = w.grad();
  w.set_grad(Tensor());
  softmax(matmul(x, w), -1).sum().backward();
  check_same(g, w.grad(), "gradient through a compiled call");
}

BOOST_AUTO_TEST_CASE(cheap_values_read_twice_are_recomputed_not_stored) {
  // GELU's derivative reads x == 0 twice; (x * 2 + y) * 3 is read twice too but is three ops
  // deep. The comparison is recomputed by each reader, the product is stored once; values equal
  // plain loops.
  std::string dir = (std::filesystem::temp_directory_path() / ("kiln-test-recompute-" + std::to_string(::getpid()))).string();
  std::filesystem::remove_all(dir);
  set_debug_dir(dir);
  auto fn = [](const Tensor& x, const Tensor& y) {
    Tensor zero = eq(x, 0.0);
    Tensor s = (x * 2.0 + y) * 3.0;
    return where(zero, 0.5, y / where(zero, 1.0, x)) + s * s;
  };
  auto f = compile(fn, {.backend = "halide", .name = "recompute"});
  Tensor x = random_tensor({64, 96}, f32, 7), y = random_tensor({64, 96}, f32, 8);
  x = where(lt(x, -1.0), 0.0, x);  // some exact zeros
  Tensor got = f(x, y);
  set_debug_dir("");
  std::vector<double> xv = host_values(x), yv = host_values(y), want;
  for (size_t i = 0; i < xv.size(); ++i) {
    double s = (xv[i] * 2 + yv[i]) * 3;
    want.push_back((xv[i] == 0 ? 0.5 : yv[i] / xv[i]) + s * s);
  }
  check_close(got, want, {64, 96}, "where(x == 0, 0.5, y / x) + (3 (2x + y))^2");
  std::string schedule = dumped(dir, ".region_0.schedule.cpp");
  // Two stored Funcs: the output, and the product (a row at a time in the output's row loop:
  // cpu.row.fuse).
  auto count = [&](const std::string& what) {
    size_t n = 0;
    for (size_t at = schedule.find(what); at != std::string::npos; at = schedule.find(what, at + 1)) ++n;
    return n;
  };
  BOOST_TEST(count(".compute_root()") == 1u, schedule);
  BOOST_TEST(count(".compute_at(add_") == 1u, schedule);
  BOOST_TEST(schedule.find("eq_") == std::string::npos, schedule);
  std::filesystem::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(cheap_values_read_by_later_regions_are_recomputed_there) {
  // h = x @ w + b feeds GELU and, three GEMMs later, a select and a product: the later pipeline
  // computes h again from the GEMM's output and b instead of loading a stored h (and h > 0 over
  // it is not stored either). Intermediates are released after their last reader while g is
  // still returned. Values equal plain loops in double.
  NoGradGuard no_grad;
  std::string dir = (std::filesystem::temp_directory_path() / ("kiln-test-recompute-across-" + std::to_string(::getpid()))).string();
  std::filesystem::remove_all(dir);
  set_debug_dir(dir);
  auto fn = [](const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& w2, const Tensor& w3) {
    Tensor h = matmul(x, w) + b;
    Tensor g = gelu(h);
    Tensor r = matmul(matmul(g, w2), w3);
    return TensorList{where(gt(h, 0.0), r, r * h), g};
  };
  auto f = compile([&](std::vector<Tensor> in) { return fn(in[0], in[1], in[2], in[3], in[4]); },
                   {.backend = "halide", .name = "recompute_across"});
  const int64_t m = 32, k = 48, n = 64, q = 16;
  Tensor x = random_tensor({m, k}, f32, 11), w = random_tensor({k, n}, f32, 12), b = random_tensor({n}, f32, 13);
  Tensor w2 = random_tensor({n, q}, f32, 14), w3 = random_tensor({q, n}, f32, 15);
  TensorList got = f({x, w, b, w2, w3});
  set_debug_dir("");
  auto mm = [](const std::vector<double>& a, const std::vector<double>& c, int64_t rows, int64_t inner, int64_t cols) {
    std::vector<double> out(size_t(rows * cols), 0.0);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        for (int64_t p = 0; p < inner; ++p) out[size_t(i * cols + j)] += a[size_t(i * inner + p)] * c[size_t(p * cols + j)];
    return out;
  };
  std::vector<double> h = mm(host_values(x), host_values(w), m, k, n), bv = host_values(b), g(h.size());
  for (size_t i = 0; i < h.size(); ++i) {
    h[i] += bv[i % size_t(n)];
    g[i] = 0.5 * h[i] * (1 + std::erf(h[i] / std::sqrt(2.0)));
  }
  std::vector<double> r = mm(mm(g, host_values(w2), m, n, q), host_values(w3), m, q, n), want(r.size());
  double scale = 0;
  for (size_t i = 0; i < r.size(); ++i) {
    want[i] = h[i] > 0 ? r[i] : r[i] * h[i];
    scale = std::max(scale, std::abs(want[i]));
  }
  // Three chained f32 GEMMs: rounding follows the largest values, not each element's.
  Tolerance chained{1e-5, 1e-6 * scale};
  check_close(got[0], want, {m, n}, chained, "where(h > 0, r, r * h)");
  check_close(got[1], g, {m, n}, gemm_tolerance(k), "gelu(h)");
  check_close(f({x, w, b, w2, w3})[0], want, {m, n}, chained, "second call");
  std::string plan = dumped(dir, ".fusion.txt");
  BOOST_TEST(plan.find("recomputes %") != std::string::npos, plan);
  // The last pipeline reads no value that the first one made: h is not written at all.
  std::string last = dumped(dir, ".region_1.schedule.cpp");
  BOOST_TEST(last.find("gt_") == std::string::npos, last);
  std::filesystem::remove_all(dir);
}
