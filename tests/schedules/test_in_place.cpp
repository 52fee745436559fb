// In-place outputs (schedules/in_place.h): a compiled function's copy_ into a tensor its graph
// reads is computed in that tensor's memory when no later read needs the old value, and written
// back by a copy otherwise; both give eager's values, and the tensor keeps its memory.
#include <algorithm>
#include <filesystem>
#include <unistd.h>

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
