// In-place outputs (schedules/in_place.h): a compiled function's copy_ into a tensor its graph
// reads is computed in that tensor's memory when no later read needs the old value, and written
// back by a copy otherwise; both give eager's values, and the tensor keeps its memory.
#include <algorithm>
#include <filesystem>
#include <unistd.h>

#include "schedules/graph_executor.h"
#include "schedules/in_place.h"
#include "support/reference.h"

using namespace kiln;
using namespace kiln::test;
namespace fs = std::filesystem;

namespace {

// Runs `calls` steps of `step` compiled (on p, m) and eagerly (on copies), checks both pairs of
// tensors and the compiled tensors' memory, and returns the compiled graph's fusion plan.
std::string compare_steps(const std::function<Tensor(Tensor&, Tensor&, const Tensor&)>& step, const std::string& name,
                          int64_t in_place_per_call) {
  std::string dir = (fs::temp_directory_path() / ("kiln-test-in-place-" + std::to_string(::getpid()))).string();
  fs::remove_all(dir);
  set_debug_dir(dir);
  Tensor p = random_tensor({96, 80}, f32, 1), m = random_tensor({96, 80}, f32, 2);
  Tensor ep = p.clone(), em = m.clone();
  auto f = compile([&](const Tensor& g) { return step(p, m, g); }, {.backend = "halide", .fullgraph = true, .name = name});
  const void* p_data = p.data_ptr();
  const void* m_data = m.data_ptr();
  uint64_t version = p.storage()->version;
  for (int call = 0; call < 3; ++call) {
    Tensor g = random_tensor({96, 80}, f32, 10 + call);
    int64_t before = in_place_outputs_run();
    Tensor got = f(g), want = step(ep, em, g);
    BOOST_TEST(in_place_outputs_run() - before == in_place_per_call, name << ", call " << call);
    check_close(got, host_values(want), want.shape(), name + ": returned value, call " + std::to_string(call));
    check_close(p, host_values(ep), ep.shape(), name + ": p after call " + std::to_string(call));
    check_close(m, host_values(em), em.shape(), name + ": m after call " + std::to_string(call));
  }
  BOOST_TEST(p.data_ptr() == p_data);
  BOOST_TEST(m.data_ptr() == m_data);
  BOOST_TEST(p.storage()->version >= version + 3, "every call bumps the version of the tensor it writes");
  set_debug_dir("");
  std::string fusion = dumped(dir, ".fusion.txt");
  fs::remove_all(dir);
  return fusion;
}

}  // namespace

BOOST_AUTO_TEST_CASE(an_update_is_computed_into_the_tensors_it_overwrites) {
  auto step = [](Tensor& p, Tensor& m, const Tensor& g) {
    m.copy_(m * 0.9 + g * 0.1);
    p.copy_(p * 0.99 - m * 0.01);
    return p.sum({1});
  };
  std::string fusion = compare_steps(step, "momentum step", 2);
  BOOST_TEST(fusion.find("2 written outputs computed in place") != std::string::npos, fusion);
}

BOOST_AUTO_TEST_CASE(an_old_value_read_after_the_write_keeps_the_copy) {
  // y reads the old p in the same pipeline that makes the new one: computing the new p in p's
  // memory first would change y.
  auto step = [](Tensor& p, Tensor& m, const Tensor& g) {
    Tensor y = exp(p * 0.5);
    p.copy_(p + g);
    m.copy_(m * 0.5 + g);
    return y + p;
  };
  std::string fusion = compare_steps(step, "read after write", 1);
  BOOST_TEST(fusion.find("1 written outputs computed in place") != std::string::npos, fusion);  // m only
}

BOOST_AUTO_TEST_CASE(a_tensor_bound_twice_is_one_memory) {
  // An optimizer holding its own handle on a module's parameter: two inputs, one memory. The
  // update reads both, each only inside its own expression: still in place.
  std::vector<Tensor> aliases;  // one per parameter (the compiled one and the eager copy)
  auto step = [&](Tensor& p, Tensor& m, const Tensor& g) {
    auto it = std::find_if(aliases.begin(), aliases.end(), [&](const Tensor& a) { return a.shares_storage_with(p); });
    const Tensor& alias = it != aliases.end() ? *it : aliases.emplace_back(p.detach());
    m.copy_(m * 0.9 + g * 0.1);
    p.copy_(alias * 0.99 - m * 0.01);
    return m.sum({0});
  };
  std::string fusion = compare_steps(step, "aliased parameter", 2);
  BOOST_TEST(fusion.find("2 written outputs computed in place") != std::string::npos, fusion);
}

namespace {

// Compiles fn, runs it once on fresh random inputs, and returns its outputs and fusion plan.
std::pair<std::vector<Tensor>, std::string> run_compiled(const std::function<std::vector<Tensor>(std::vector<Tensor>)>& fn,
                                                         const std::vector<Tensor>& inputs, const std::string& name) {
  std::string dir = (fs::temp_directory_path() / ("kiln-test-reuse-" + std::to_string(::getpid()))).string();
  fs::remove_all(dir);
  set_debug_dir(dir);
  auto f = compile(fn, {.backend = "halide", .fullgraph = true, .name = name});
  std::vector<Tensor> got = f(inputs);
  set_debug_dir("");
  std::string fusion = dumped(dir, ".fusion.txt");
  fs::remove_all(dir);
  return {got, fusion};
}

// (x w)[i][j] + scale * t[j][i] in double.
std::vector<double> gemm_plus_transposed(const Tensor& x, const Tensor& w, const Tensor& t, double scale) {
  int64_t m = x.size(0), k = x.size(1), n = w.size(1);
  std::vector<double> hx = host_values(x), hw = host_values(w), ht = host_values(t), out(size_t(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t q = 0; q < k; ++q) acc += hx[size_t(i * k + q)] * hw[size_t(q * n + j)];
      out[size_t(i * n + j)] = acc + scale * ht[size_t(j * m + i)];
    }
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(an_output_takes_the_memory_of_an_intermediate_at_its_last_read) {
  // The GEMM's result dies in the add that reads it: the add is computed over it. The add also
  // reads t across its layout, the read that otherwise runs in tiles shifted inwards at the
  // edges (200 is not a multiple of the tile): computed over its input, it must not be.
  Tensor x = random_tensor({200, 48}, f32, 21), w = random_tensor({48, 200}, f32, 22);
  Tensor t = random_tensor({200, 200}, f32, 23);
  auto fn = [](std::vector<Tensor> in) {
    return std::vector<Tensor>{matmul(in[0], in[1]) + in[2].transpose(0, 1)};
  };
  auto [got, fusion] = run_compiled(fn, {x, w, t}, "reuse over a GEMM");
  BOOST_TEST(fusion.find("is computed over") != std::string::npos, fusion);
  check_close(got[0], gemm_plus_transposed(x, w, t, 1.0), {200, 200}, "reuse over a GEMM");
}

BOOST_AUTO_TEST_CASE(an_intermediate_the_caller_gets_keeps_its_memory) {
  // h is returned too: the add must not write over it.
  Tensor x = random_tensor({64, 32}, f32, 31), w = random_tensor({32, 64}, f32, 32);
  Tensor t = random_tensor({64, 64}, f32, 33);
  auto fn = [](std::vector<Tensor> in) {
    Tensor h = matmul(in[0], in[1]);
    return std::vector<Tensor>{h + in[2].transpose(0, 1) * 0.5, h};
  };
  auto [got, fusion] = run_compiled(fn, {x, w, t}, "returned intermediate");
  BOOST_TEST(fusion.find("is computed over") == std::string::npos, fusion);
  check_close(got[0], gemm_plus_transposed(x, w, t, 0.5), {64, 64}, "returned intermediate: sum");
  check_close(got[1], gemm_plus_transposed(x, w, t, 0.0), {64, 64}, "returned intermediate: h");
}

BOOST_AUTO_TEST_CASE(an_intermediate_read_by_a_later_step_keeps_its_memory) {
  // h is read again by the second GEMM, after the add: the add gets a buffer of its own.
  Tensor x = random_tensor({64, 64}, f32, 41), w = random_tensor({64, 64}, f32, 42);
  Tensor t = random_tensor({64, 64}, f32, 43);
  auto fn = [](std::vector<Tensor> in) {
    Tensor h = matmul(in[0], in[1]);
    Tensor y = h + in[2].transpose(0, 1) * 0.5;
    return std::vector<Tensor>{matmul(y, h)};
  };
  auto [got, fusion] = run_compiled(fn, {x, w, t}, "intermediate read later");
  std::vector<double> y = gemm_plus_transposed(x, w, t, 0.5), h = gemm_plus_transposed(x, w, t, 0.0);
  std::vector<double> want(64 * 64, 0.0);
  for (int i = 0; i < 64; ++i)
    for (int j = 0; j < 64; ++j)
      for (int q = 0; q < 64; ++q) want[size_t(i * 64 + j)] += y[size_t(i * 64 + q)] * h[size_t(q * 64 + j)];
  // Two chained f32 GEMMs of 64 terms: values up to ~100, rounding ~1e-4. h overwritten by y
  // would be off by whole units.
  check_close(got[0], want, {64, 64}, {1e-4, 1e-3}, "intermediate read later");
  BOOST_TEST(fusion.find("is computed over") == std::string::npos, fusion);
}
