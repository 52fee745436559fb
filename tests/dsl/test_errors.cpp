// Every error path of the foundation raises kiln::Error (nothing aborts) with a message that
// names the op, the shapes or dtypes involved and the rule that was broken.
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "support/reference.h"

using namespace kiln;
using namespace kiln::test;

namespace {

Tensor x23() { return random_tensor({2, 3}, f32, 1); }

}  // namespace

BOOST_AUTO_TEST_CASE(shapes_that_do_not_broadcast) {
  Tensor a = x23(), b = random_tensor({4}, f32, 2);
  check_error([&] { add(a, b); }, {"add", "[2, 3]", "[4]", "do not broadcast", "3 vs 4"});
  check_error([&] { a * random_tensor({3, 3}, f32, 3); }, {"mul", "[2, 3]", "[3, 3]", "do not broadcast"});
  check_error([&] { where(random_tensor({5}, bool_, 4), a, a); }, {"where", "[5]", "[2, 3]"});
}

BOOST_AUTO_TEST_CASE(wrong_dtypes) {
  Tensor a = x23();
  check_error([&] { where(a, a, a); }, {"where", "condition", "bool", "f32"});
  check_error([&] { where(random_tensor({2, 3}, i64, 5), a, a); }, {"where", "bool", "i64"});
  check_error([&] { rand({2}, {.dtype = i32}); }, {"rand", "floating", "i32"});
  check_error([&] { randn({2}, {.dtype = bool_}); }, {"randn", "floating", "bool"});
  check_error([&] { a.data<double>(); }, {"data", "f32", "f64"});
}

BOOST_AUTO_TEST_CASE(dims_out_of_range) {
  Tensor a = x23();
  check_error([&] { a.transpose(0, 2); }, {"transpose", "dim 2", "rank 2"});
  check_error([&] { a.transpose(-3, 0); }, {"transpose", "dim -3", "rank 2"});
  check_error([&] { a.squeeze(2); }, {"squeeze", "dim 2", "rank 2"});
  check_error([&] { a.unsqueeze(3); }, {"unsqueeze", "dim 3", "rank 2", "-3 <= dim <= 2"});
  check_error([&] { a.unsqueeze(-4); }, {"unsqueeze", "dim -4"});
  check_error([&] { a.slice(2, 0, 1); }, {"slice", "dim 2", "rank 2"});
  check_error([&] { a.narrow(-3, 0, 1); }, {"narrow", "dim -3", "rank 2"});
  check_error([&] { a.size(5); }, {"size", "dim 5", "rank 2"});
  check_error([&] { random_tensor({}, f32, 6).slice(0, 0, 1); }, {"slice", "0-d"});
  check_error([&] { a.permute({0, 2}); }, {"permute", "dim 2", "rank 2"});
}

BOOST_AUTO_TEST_CASE(slice_narrow_and_t_arguments) {
  Tensor a = x23();
  check_error([&] { a.slice(1, 0, 3, 0); }, {"slice", "step", "0"});
  check_error([&] { a.slice(1, 0, 3, -1); }, {"slice", "step", "-1"});
  check_error([&] { a.narrow(1, 2, 2); }, {"narrow", "[2, 4)", "dim 1", "size 3"});
  check_error([&] { a.narrow(0, -1, 1); }, {"narrow", "out of bounds"});
  check_error([&] { random_tensor({2, 3, 4}, f32, 7).t(); }, {"t:", "[2, 3, 4]", "rank <= 2"});
}

BOOST_AUTO_TEST_CASE(reshape_to_a_different_element_count) {
  Tensor a = x23();
  check_error([&] { a.reshape({4}); }, {"reshape", "[2, 3]", "6 elements", "[4]", "4 elements"});
  check_error([&] { a.reshape({4, -1}); }, {"reshape", "[2, 3]", "[4, -1]"});
  check_error([&] { a.reshape({-1, -1}); }, {"reshape", "only one dim can be -1"});
  check_error([&] { a.t().reshape({5}); }, {"reshape", "[3, 2]", "[5]"});  // also when a copy would be needed
  check_error([&] { a.view({7}); }, {"view", "[2, 3]", "[7]"});
  check_error([&] { a.view({-2, 3}); }, {"view", "invalid size -2"});
  check_error([&] { random_tensor({0, 3}, f32, 8).reshape({-1, 0}); }, {"reshape", "[0, 3]", "[-1, 0]"});
}

BOOST_AUTO_TEST_CASE(malformed_npy_files) {
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("kiln_test_errors_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::string path = (dir / "truncated.npy").string();
  save_npy(path, x23());
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 4);
  check_error([&] { load_npy(path); }, {"load_npy", path, "truncated data", "[2, 3]", "<f4", "24 bytes", "20"});
  std::string bad = (dir / "bad.npy").string();
  std::FILE* f = std::fopen(bad.c_str(), "wb");
  std::fputs("not an npy file at all", f);
  std::fclose(f);
  check_error([&] { load_npy(bad); }, {"load_npy", bad, "bad magic"});
  check_error([&] { load_npy((dir / "missing.npy").string()); }, {"load_npy", "missing.npy", "No such file"});
  check_error([&] { save_npy(path, x23().to(bf16)); }, {"save_npy", "bf16", "to(f32)"});
  std::filesystem::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(cuda_asked_for_where_there_is_none) {
  check_error([] { zeros({2}, {.device = Device::cuda()}); }, {"[2]", "cuda:0", "no CUDA device"});
  check_error([] { randn({3, 4}, {.device = Device::cuda(1)}); }, {"[3, 4]", "cuda:1", "no CUDA device"});
  check_error([] { x23().to(Device::cuda()); }, {"to:", "[2, 3]", "cpu", "cuda:0", "no CUDA device"});
}

BOOST_AUTO_TEST_CASE(item_of_many_elements) {
  check_error([] { x23().item<float>(); }, {"item", "[2, 3]", "6 elements"});
  check_error([] { zeros({0}).item<float>(); }, {"item", "[0]", "0 elements"});
}

BOOST_AUTO_TEST_CASE(from_vector_size_mismatch) {
  check_error([] { from_vector<float>({1, 2, 3}, {2, 2}); }, {"from_vector", "3 values", "[2, 2]", "4 elements"});
  check_error([] { from_vector<int64_t>({1, 2}, {3, -1}); }, {"from_vector", "[3, -1]"});
}

BOOST_AUTO_TEST_CASE(expand_to_an_incompatible_shape) {
  Tensor a = x23();
  check_error([&] { a.expand({4, 3}); }, {"expand", "[2, 3]", "[4, 3]", "dim 0", "2 -> 4"});
  check_error([&] { a.expand({3}); }, {"expand", "[2, 3]", "[3]", "fewer dims"});
  check_error([&] { a.expand({-1, 2, 3}); }, {"expand", "-1", "leading dim"});
}

BOOST_AUTO_TEST_CASE(permute_with_a_repeated_dim) {
  Tensor a = random_tensor({2, 3, 4}, f32, 9);
  check_error([&] { a.permute({0, 0, 1}); }, {"permute", "dim 0 appears twice", "[0, 0, 1]"});
  check_error([&] { a.permute({2, -1, 0}); }, {"permute", "appears twice", "[2, -1, 0]"});
  check_error([&] { a.permute({0, 1}); }, {"permute", "2 dims", "rank 3"});
}

BOOST_AUTO_TEST_CASE(use_of_an_undefined_tensor) {
  Tensor u;
  BOOST_TEST(!u.defined());
  check_error([&] { u.shape(); }, {"undefined tensor"});
  check_error([&] { u.numel(); }, {"undefined tensor"});
  check_error([&] { u.reshape({1}); }, {"reshape", "undefined tensor"});
  check_error([&] { add(u, x23()); }, {"add", "input 0", "undefined tensor"});
  check_error([&] { exp(u); }, {"exp", "input 0", "undefined tensor"});
  check_error([&] { save_npy("unused.npy", u); }, {"save_npy", "undefined tensor"});
  BOOST_TEST(u.str() == "Tensor(undefined)");
}

BOOST_AUTO_TEST_CASE(creation_arguments) {
  check_error([] { arange(0, 5, 0); }, {"arange", "step must be nonzero"});
  check_error([] { arange(5, 0, 1); }, {"arange", "wrong sign"});
  check_error([] { linspace(0, 1, -1); }, {"linspace", "steps", "-1"});
  check_error([] { randint(3, 3, {2}); }, {"randint", "empty range", "[3, 3)"});
  check_error([] { zeros({2, -1}); }, {"full", "negative size", "[2, -1]"});
  check_error([] { dtype_from_name("f128"); }, {"f128"});
}
