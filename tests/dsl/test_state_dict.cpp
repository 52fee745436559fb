// state_dict as safetensors: round trips, the file layout, and bad files that must raise
// kiln::Error without touching the model; and Dropout's statistics and eval mode.
#include <cstdio>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include "support/reference.h"

using namespace kiln;
using namespace kiln::test;

namespace {

std::string temp_path(const std::string& name) { return "/tmp/kiln_test_" + std::to_string(::getpid()) + "_" + name; }

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << bytes;
}

}  // namespace

BOOST_AUTO_TEST_CASE(round_trip_restores_every_parameter) {
  manual_seed(1);
  nn::TinyGpt a({.vocab = 9, .seq = 5, .width = 8, .heads = 2, .layers = 2});
  manual_seed(2);
  nn::TinyGpt b({.vocab = 9, .seq = 5, .width = 8, .heads = 2, .layers = 2});
  Tensor tokens = from_vector<int64_t>({1, 2, 3, 4, 5, 8, 7, 6, 5, 4}, {2, 5});
  std::string path = temp_path("gpt.safetensors");
  nn::save_state_dict(a, path);
  Tensor before = b.forward(tokens);
  nn::load_state_dict(b, path);
  check_close(b.forward(tokens), host_values(a.forward(tokens)), {2, 5, 9}, {0, 0}, "same outputs");
  auto pa = a.named_parameters(), pb = b.named_parameters();
  for (size_t i = 0; i < pa.size(); ++i) check_close(pb[i].second, host_values(pa[i].second), pa[i].second.shape(), {0, 0}, pa[i].first);
  BOOST_TEST(host_values(before) != host_values(b.forward(tokens)));

  std::string bytes = file_bytes(path);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(static_cast<unsigned char>(bytes[i])) << (8 * i);
  BOOST_TEST(n % 8 == 0u);
  std::string header = bytes.substr(8, n);
  BOOST_TEST(header.find("\"wte.weight\":{\"dtype\":\"F32\",\"shape\":[9,8],\"data_offsets\":[0,288]}") != std::string::npos);
  int64_t total = 0;
  for (const Tensor& p : a.parameters()) total += p.numel() * 4;
  BOOST_TEST(bytes.size() == 8 + n + uint64_t(total));
  std::remove(path.c_str());
}

BOOST_AUTO_TEST_CASE(bad_files_raise_and_leave_the_model_untouched) {
  manual_seed(3);
  nn::MLP src({3, 4, 2});
  nn::MLP dst({3, 4, 2});
  nn::MLP other({3, 5, 2});
  std::string path = temp_path("mlp.safetensors");
  nn::save_state_dict(src, path);
  std::string good = file_bytes(path);
  std::vector<double> dst_before;
  for (const Tensor& p : dst.parameters())
    for (double v : host_values(p)) dst_before.push_back(v);

  auto expect_error = [&](const std::string& bytes, std::vector<std::string> parts) {
    write_file(path, bytes);
    check_error([&] { nn::load_state_dict(dst, path); }, parts);
  };
  expect_error(good.substr(0, 5), {"load_safetensors", "too short"});
  expect_error(good.substr(0, good.size() - 4), {"load_safetensors", "data_offsets", "1.bias"});
  std::string big = good;
  big[7] = char(0x7f);
  expect_error(big, {"load_safetensors", "header length", "past the end"});
  std::string garbled = good;
  garbled[9] = '[';
  expect_error(garbled, {"load_safetensors", "malformed"});
  nn::save_state_dict(other, path);
  check_error([&] { nn::load_state_dict(dst, path); }, {"load_state_dict", "shape", "[5, 3]", "[4, 3]"});
  check_error([&] { nn::load_state_dict(dst, temp_path("missing")); }, {"load_safetensors", "cannot open"});

  std::vector<double> dst_after;
  for (const Tensor& p : dst.parameters())
    for (double v : host_values(p)) dst_after.push_back(v);
  BOOST_TEST(dst_before == dst_after);  // nothing was half-loaded
  std::remove(path.c_str());
}

BOOST_AUTO_TEST_CASE(dropout_keeps_the_mean_and_is_off_in_eval) {
  manual_seed(4);
  nn::Dropout drop(0.25);
  Tensor x = ones({200, 500});
  std::vector<double> y = host_values(drop.forward(x));
  double zeros = 0, sum = 0;
  for (double v : y) {
    zeros += v == 0;
    sum += v;
    BOOST_TEST((v == 0 || std::abs(v - 1 / 0.75) < 1e-6));
  }
  BOOST_TEST(std::abs(zeros / double(y.size()) - 0.25) < 0.01);
  BOOST_TEST(std::abs(sum / double(y.size()) - 1.0) < 0.02);
  drop.eval();
  BOOST_TEST(drop.forward(x).shares_storage_with(x));
  check_error([] { nn::Dropout bad(1.0); }, {"Dropout", "[0, 1)"});
}
