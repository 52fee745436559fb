// split_long_reductions (graph/split_long_reductions.cpp) on hand-built graphs: which nodes it
// splits (softmax, log_softmax and logsumexp of long static f32 rows along the last dim; sum, mean,
// max and min of all elements of large f32 tensors; on CUDA only), and that the split graphs, run
// op by op on the CPU, give the unsplit ops' values and plain double loops', infinities included.
#include <cmath>
#include <limits>

#include "graph/passes.h"
#include "support/graph_builder.h"
#include "support/reference.h"

using namespace kiln;
using namespace kiln::test;

namespace {

using Values = std::vector<double>;
const double kInf = std::numeric_limits<double>::infinity();

}  // namespace

// Long rows on CUDA are split: softmax and log_softmax along the last dim, logsumexp over it with
// and without keepdim ([3, 50304]: chunks of 6288, GPT-2's logits). Kept: rows of a length no chunk
// of 128 to 8192 divides (16411 is prime), short rows (4096), a softmax along dim 0, f64, and every
// node on the CPU. The split graph matches the original and double loops on fresh random inputs.
BOOST_AUTO_TEST_CASE(split_long_reductions_splits_long_cuda_rows_only) {
  const int64_t N = 3, C = 50304;
  for (bool cuda : {false, true}) {
    Builder b;
    if (cuda) b.device = Device::cuda(0);
    int x = b.input({N, C});
    int y1 = b.op("softmax", {x}, {{"dim", int64_t(-1)}});
    int y2 = b.op("log_softmax", {x}, {{"dim", int64_t(1)}});
    int y3 = b.op("logsumexp", {x}, {{"dims", std::vector<int64_t>{-1}}, {"keepdim", false}});
    int y4 = b.op("logsumexp", {x}, {{"dims", std::vector<int64_t>{1}}, {"keepdim", true}});
    int k1 = b.op("softmax", {b.input({2, 16411})}, {{"dim", int64_t(-1)}});
    int k2 = b.op("softmax", {b.input({4, 4096})}, {{"dim", int64_t(-1)}});
    int k3 = b.op("softmax", {x}, {{"dim", int64_t(0)}});
    int k4 = b.op("logsumexp", {b.input({2, C}, f64)}, {{"dims", std::vector<int64_t>{-1}}, {"keepdim", false}});
    b.g.outputs = {y1, y2, y3, y4, k1, k2, k3, k4};
    Graph g = b.g;
    BOOST_TEST_CONTEXT((cuda ? "cuda" : "cpu")) {
      BOOST_TEST(split_long_reductions(g) == (cuda ? 4 : 0));
      check_valid(g);
      BOOST_TEST(count_op(g, "softmax") == (cuda ? 3 : 4));
      BOOST_TEST(count_op(g, "log_softmax") == (cuda ? 0 : 1));
      BOOST_TEST(count_op(g, "logsumexp") == (cuda ? 1 + 2 * 4 : 3));  // the chunks' and the rows' of each split
      if (!cuda) continue;
      auto [args, got] = check_same_on_cpu(b.g, g, 51, "split rows", Tolerance{1e-5, 1e-7});
      Values in = host_values(args[0]);
      Values lse = along_rows(in, C, [](const Values& r) { return Values{logsumexp_of(r)}; });
      Values soft = along_rows(in, C, [](const Values& r) {
        Values out;
        for (double e : r) out.push_back(std::exp(e - logsumexp_of(r)));
        return out;
      });
      Values log_soft = along_rows(in, C, [](const Values& r) {
        Values out;
        for (double e : r) out.push_back(e - logsumexp_of(r));
        return out;
      });
      check_close(got[0], soft, {N, C}, {1e-5, 1e-9}, "softmax vs double loops");
      check_close(got[1], log_soft, {N, C}, {1e-5, 1e-5}, "log_softmax vs double loops");
      check_close(got[2], lse, {N}, {1e-6, 1e-6}, "logsumexp vs double loops");
      check_close(got[3], lse, {N, 1}, {1e-6, 1e-6}, "logsumexp keepdim vs double loops");
    }
  }
}

// A chunk of -inf alone, a row of -inf alone and a row with +inf: the -inf chunk adds nothing (no
// NaN from exp(-inf - -inf)), and logsumexp is -inf and +inf for the other two rows, as unsplit.
BOOST_AUTO_TEST_CASE(split_long_reductions_keeps_infinities_as_the_unsplit_ops) {
  const int64_t N = 3, C = 16384;  // chunks of 8192
  Values in = host_values(random_tensor({N, C}, f32, 52, -4, 4));
  for (int64_t c = 8192; c < C; ++c) in[size_t(c)] = -kInf;  // row 0: chunk 1
  in[5] = -kInf;
  for (int64_t c = 0; c < C; ++c) in[size_t(C + c)] = -kInf;  // row 1
  in[size_t(2 * C + 77)] = kInf;                              // row 2
  std::vector<float> f(in.begin(), in.end());
  Tensor x = from_vector(f, {N, C});
  Builder b;
  b.device = Device::cuda(0);
  int v = b.input({N, C});
  b.g.outputs = {b.op("softmax", {v}, {{"dim", int64_t(-1)}}), b.op("log_softmax", {v}, {{"dim", int64_t(-1)}}),
                 b.op("logsumexp", {v}, {{"dims", std::vector<int64_t>{-1}}, {"keepdim", false}})};
  Graph g = b.g;
  BOOST_TEST_REQUIRE(split_long_reductions(g) == 3);
  std::vector<Tensor> want = run(on_cpu(b.g), {x}), got = run(on_cpu(g), {x});
  // Row 0 (a chunk of -inf) as unsplit in all three; row 1 (all -inf) too in log_softmax (NaN) and
  // logsumexp (-inf). Softmax's all -inf row and the +inf row differ in their NaNs: unsplit,
  // exp(x - max) - log(sum) with an infinite max; split, exp(x - lse).
  auto same_rows = [&](size_t o, int64_t n, const std::string& what) {  // output o's first n rows
    Values a = host_values(got[o]), w = host_values(want[o]);
    for (size_t i = 0; i < size_t(n * C); ++i)
      if (!(std::isnan(a[i]) && std::isnan(w[i])) && a[i] != w[i] && !(std::abs(a[i] - w[i]) <= 1e-5 * std::abs(w[i]) + 1e-7))
        BOOST_ERROR(what << " element " << i << ": " << a[i] << " split, " << w[i] << " unsplit");
    return a;
  };
  same_rows(0, 1, "softmax");
  BOOST_TEST(std::isnan(same_rows(1, 2, "log_softmax")[size_t(C)]));
  Values lse = host_values(got[2]);
  Values row0(in.begin(), in.begin() + C);
  BOOST_TEST(std::abs(lse[0] - logsumexp_of(row0)) < 1e-5 * std::abs(lse[0]) + 1e-6);
  BOOST_TEST(lse[1] == -kInf);
  BOOST_TEST(lse[2] == kInf);
}

// Sum, mean, max and min of all 2M elements of [1024, 2048] (dims empty or listed, with and without
// keepdim) are split into chunks of 8192 and the chunks' 256 results. Kept: a count no chunk of 128
// to 8192 divides (1048583 is prime), fewer than 2^20 elements, a reduction over one dim, argmax,
// and every node on the CPU. Compared with the unsplit graph and double loops on fresh inputs.
BOOST_AUTO_TEST_CASE(split_long_reductions_splits_large_full_reductions) {
  const int64_t R = 1024, C = 2048;
  for (bool cuda : {false, true}) {
    Builder b;
    if (cuda) b.device = Device::cuda(0);
    int x = b.input({R, C});
    auto reduce = [&](const char* op, int v, std::vector<int64_t> dims, bool keepdim) {
      return b.op(op, {v}, {{"dims", dims}, {"keepdim", keepdim}});
    };
    int y1 = reduce("sum", x, {}, false);
    int y2 = reduce("mean", x, {0, 1}, false);
    int y3 = reduce("max", x, {}, true);
    int y4 = reduce("min", x, {-1, 0}, false);
    int k1 = reduce("sum", b.input({1048583}), {}, false);
    int k2 = reduce("sum", b.input({512, 1024}), {}, false);
    int k3 = reduce("sum", x, {0}, false);
    int k4 = b.op("argmax", {x}, {{"dims", std::vector<int64_t>{1}}, {"keepdim", false}});
    b.g.outputs = {y1, y2, y3, y4, k1, k2, k3, k4};
    Graph g = b.g;
    BOOST_TEST_CONTEXT((cuda ? "cuda" : "cpu")) {
      BOOST_TEST(split_long_reductions(g) == (cuda ? 4 : 0));
      check_valid(g);
      BOOST_TEST(count_op(g, "sum") == (cuda ? 2 + 3 : 4));
      BOOST_TEST(count_op(g, "mean") == (cuda ? 2 : 1));
      BOOST_TEST(count_op(g, "max") == (cuda ? 2 : 1));
      if (!cuda) continue;
      auto [args, got] = check_same_on_cpu(b.g, g, 53, "split full reductions", Tolerance{1e-5, 1e-5});
      Values in = host_values(args[0]);
      double sum = 0, mx = -kInf, mn = kInf;
      for (double e : in) sum += e, mx = std::max(mx, e), mn = std::min(mn, e);
      check_close(got[0], {sum}, {}, {1e-5, 1e-3}, "sum vs a double loop");
      check_close(got[1], {sum / double(R * C)}, {}, {1e-5, 1e-7}, "mean vs a double loop");
      check_close(got[2], {mx}, {1, 1}, {0, 0}, "max keepdim vs a double loop");
      check_close(got[3], {mn}, {}, {0, 0}, "min vs a double loop");
    }
  }
}

// GPT-2's loss: cross_entropy of [N, 50304] logits on CUDA becomes the rows' split log-sum-exps,
// the targets' logits gathered by one embedding, and the mean; both outputs (the loss and the
// rows' log-sum-exps, which the backward reads) match the fused op and double loops, the first and
// last class among the targets. Kept: on the CPU.
BOOST_AUTO_TEST_CASE(split_long_reductions_gathers_cross_entropy_targets) {
  const int64_t N = 5, C = 50304;
  for (bool cuda : {false, true}) {
    Builder b;
    if (cuda) b.device = Device::cuda(0);
    int x = b.input({N, C}), t = b.input({N}, DType::i64);
    b.g.outputs = b.g.add_inferred_node(op_def("cross_entropy"), {}, {x, t});
    Graph g = b.g;
    BOOST_TEST_CONTEXT((cuda ? "cuda" : "cpu")) {
      BOOST_TEST(split_long_reductions(g) == (cuda ? 1 : 0));
      check_valid(g);
      BOOST_TEST(count_op(g, "cross_entropy") == (cuda ? 0 : 1));
      BOOST_TEST(count_op(g, "embedding") == (cuda ? 1 : 0));
      if (!cuda) continue;
      Tensor logits = random_tensor({N, C}, f32, 54, -6, 6);
      std::vector<int64_t> targets{0, C - 1, 777, 31337, 12};
      Tensor tt = from_vector(targets, {N});
      std::vector<Tensor> want = run(on_cpu(b.g), {logits, tt}), got = run(on_cpu(g), {logits, tt});
      check_close(got[0], host_values(want[0]), {}, {1e-6, 1e-6}, "loss vs the fused op");
      check_close(got[1], host_values(want[1]), {N}, {1e-6, 1e-6}, "log-sum-exps vs the fused op");
      Values in = host_values(logits);
      Values lse = along_rows(in, C, [](const Values& r) { return Values{logsumexp_of(r)}; });
      double loss = 0;
      for (int64_t i = 0; i < N; ++i) loss += lse[size_t(i)] - in[size_t(i * C + targets[size_t(i)])];
      check_close(got[0], {loss / double(N)}, {}, {1e-6, 1e-6}, "loss vs double loops");
      check_close(got[1], lse, {N}, {1e-6, 1e-6}, "log-sum-exps vs double loops");
    }
  }
}
