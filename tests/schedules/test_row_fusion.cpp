// The CPU schedule's row fusion (schedules/cpu_schedule.cpp, cpu.row.fuse): a row op's result that
// one row op alone reads, row by row, is computed a row at a time in its reader's row loop. Values
// against plain loops in double, where it applies (a chain of row ops, 2-D and 3-D) and where it
// must not (an intermediate also read transposed, or summed down its columns); the schedule says
// which.
#include <cmath>
#include <filesystem>
#include <unistd.h>

#include "support/reference.h"

using namespace kiln;
using namespace kiln::test;

namespace {

constexpr double kEps = 1e-5;

Line layer_norm_line(const Line& v) {
  double mean = mean_of(v), var = 0;
  for (double x : v) var += (x - mean) * (x - mean);
  var /= double(v.size());
  Line out;
  for (double x : v) out.push_back((x - mean) / std::sqrt(var + kEps));
  return out;
}

// norm_softmax's chain, one row: layer_norm, softmax of twice it, plus the row, layer_norm, log_softmax.
Line chain_line(const Line& x) {
  Line a = layer_norm_line(x);
  for (double& v : a) v *= 2;
  Line b = softmax_line(a);
  for (size_t i = 0; i < b.size(); ++i) b[i] += x[i];
  return log_softmax_line(layer_norm_line(b));
}

Tensor chain(const Tensor& x) {
  int64_t c = x.shape().back();
  Tensor a = layer_norm(x, {c}, Tensor(), Tensor(), kEps);
  Tensor b = softmax(a * 2.0, -1) + x;
  return log_softmax(layer_norm(b, {c}, Tensor(), Tensor(), kEps), -1);
}

// The region's schedule as kiln prints it, from a compile of fn on x under KILN_DEBUG_DIR.
template <typename F>
std::string schedule_of(const std::string& name, F fn, const Tensor& x, Tensor* out) {
  std::string dir = (std::filesystem::temp_directory_path() / ("kiln-test-row-fusion-" + std::to_string(::getpid()))).string();
  std::filesystem::remove_all(dir);
  set_debug_dir(dir);
  auto f = compile(fn, {.backend = "halide", .name = name});
  *out = f(x);
  set_debug_dir("");
  std::string s = dumped(dir, ".region_0.schedule.cpp");
  std::filesystem::remove_all(dir);
  return s;
}

// Whether the schedule stores the Func named `op`$N whole (a line "op$N.compute_root()").
bool stored_whole(const std::string& schedule, const std::string& op) {
  for (size_t at = schedule.find(op + "$"); at != std::string::npos; at = schedule.find(op + "$", at + 1)) {
    if (at > 0 && schedule[at - 1] != '\n') continue;
    size_t end = schedule.find('\n', at);
    if (schedule.substr(at, end - at).find(".compute_root()") != std::string::npos) return true;
  }
  return false;
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

BOOST_AUTO_TEST_CASE(row_op_chains_keep_their_intermediates_a_row_at_a_time) {
  for (const Shape& shape : {Shape{64, 96}, Shape{3, 16, 40}, Shape{5, 1000}}) {
    Tensor x = random_tensor(shape, f32, 11), got;
    std::string schedule = schedule_of("row_chain", [](const Tensor& t) { return chain(t); }, x, &got);
    check_close(got, along_dim(x, -1, chain_line), shape, "row-op chain " + to_string(shape));
    // The output alone is stored whole; the two layer norms and the softmax a row at a time, each
    // in the row loop of the op that reads it.
    BOOST_TEST(count(schedule, ".compute_root()") == 1u, schedule);
    BOOST_TEST(stored_whole(schedule, "log_softmax"), schedule);
    BOOST_TEST(count(schedule, ".compute_at(softmax") == 3u, schedule);  // layer_norm and its two row sums
    BOOST_TEST(count(schedule, ".compute_at(log_softmax") == 3u, schedule);  // layer_norm, max, sum of exps
  }
}

BOOST_AUTO_TEST_CASE(intermediates_read_across_rows_are_stored_whole) {
  Tensor x = random_tensor({48, 48}, f32, 12), got;
  // softmax(x) is read by the log_softmax along rows and, transposed, by the sum: not row by row.
  std::string schedule = schedule_of(
      "transposed_reader", [](const Tensor& t) { return log_softmax(softmax(t, -1), -1) + softmax(t, -1).t() * 0.5; }, x,
      &got);
  Line s = along_dim(x, -1, softmax_line), ls = along_dim(x, -1, [](const Line& l) { return log_softmax_line(softmax_line(l)); });
  std::vector<double> want(ls.size());
  for (int64_t i = 0; i < 48; ++i)
    for (int64_t j = 0; j < 48; ++j) want[size_t(i * 48 + j)] = ls[size_t(i * 48 + j)] + 0.5 * s[size_t(j * 48 + i)];
  check_close(got, want, {48, 48}, "log_softmax(softmax(x)) + softmax(x)^T / 2");
  BOOST_TEST(stored_whole(schedule, "softmax"), schedule);

  // A column sum of a row op's result reads every row for each column.
  Tensor y = random_tensor({40, 24}, f32, 13), sums;
  schedule = schedule_of("column_reader", [](const Tensor& t) { return sum(softmax(t, -1), {0}); }, y, &sums);
  Line sy = along_dim(y, -1, softmax_line);
  std::vector<double> want_sums(24, 0.0);
  for (int64_t i = 0; i < 40; ++i)
    for (int64_t j = 0; j < 24; ++j) want_sums[size_t(j)] += sy[size_t(i * 24 + j)];
  check_close(sums, want_sums, {24}, "sum(softmax(x), 0)");
  BOOST_TEST(stored_whole(schedule, "softmax"), schedule);
}
