// Graph passes on hand-built graphs: DCE keeps outputs and random draws, CSE merges duplicate
// work but not random draws, fold_views drops identity views and collapses reshape chains, and
// cublas_gemm_operands copies for cuBLAS the head views it cannot read in place, and
// decompose leaves only primitive ops whose results, run op by op through dispatch() on fresh
// random inputs, match the composite ops and plain double loops.
#include <algorithm>
#include <cmath>

#include "dsl/dispatch.h"
#include "dsl/eager/matmul.h"
#include "graph/passes.h"
#include "support/graph_builder.h"
#include "support/reference.h"

using namespace kiln;
using namespace kiln::test;

namespace {

using Values = std::vector<double>;

// Decomposes a copy of g with every known rule; checks only primitive ops remain and that the
// outputs match the original graph's on fresh random inputs. Returns the decomposed graph.
Graph decompose_and_compare(const Graph& g, uint64_t seed, const std::string& what) {
  Graph d = g;
  std::vector<std::string> names = default_decompositions();
  BOOST_TEST(decompose(d, {names.begin(), names.end()}) == 1);
  check_valid(d);
  for (const GraphNode& n : d.nodes) {
    BOOST_TEST_CONTEXT(what << ": " << n.op->name) {
      BOOST_TEST((n.op->schedule_class == ScheduleClass::pointwise ||
                  n.op->schedule_class == ScheduleClass::reduction ||
                  n.op->schedule_class == ScheduleClass::creation));
      BOOST_TEST((std::find(names.begin(), names.end(), n.op->name) == names.end()));
    }
  }
  std::vector<Tensor> args = random_args(g, seed);
  std::vector<Tensor> want = run(g, args), got = run(d, args);
  for (size_t k = 0; k < want.size(); ++k) {
    Tolerance tol = tolerance(want[k].dtype());
    if (want[k].dtype() == f32) tol.atol = 1e-5;
    check_close(got[k], host_values(want[k]), want[k].shape(), tol, what);
  }
  return d;
}

}  // namespace

BOOST_AUTO_TEST_CASE(dce_removes_dead_nodes_and_keeps_outputs_and_random_draws) {
  Builder b;
  int x = b.input({4, 8});
  int unused = b.input({3});
  int dead = b.op("log", {b.op("exp", {x})});
  b.op("randn", {}, {{"shape", Shape{5}}, {"dtype", std::string("f32")}, {"device", std::string("cpu")}});
  b.op("rand_like", {b.op("abs", {x})}, {{"dtype", std::string("f32")}});  // abs feeds a draw: live
  int y = b.op("neg", {x});
  b.g.outputs = {y, x};
  Graph& g = b.g;
  int before = g.op_count();

  BOOST_TEST(eliminate_dead_code(g) == 2);
  check_valid(g);
  BOOST_TEST(g.op_count() == before - 2);
  BOOST_TEST(count_op(g, "exp") == 0);
  BOOST_TEST(count_op(g, "log") == 0);
  BOOST_TEST(count_op(g, "randn") == 1);
  BOOST_TEST(count_op(g, "rand_like") == 1);
  BOOST_TEST(count_op(g, "abs") == 1);
  BOOST_TEST(g.inputs.size() == 2u);
  BOOST_TEST(g.values.size() == 2u + g.nodes.size());  // compact: every value is an input or an output
  BOOST_TEST(g.nodes[g.values[g.outputs[0]].producer].op->name == "neg");
  BOOST_TEST(g.values[g.outputs[1]].producer == -1);
  BOOST_TEST(g.text().find("neg") != std::string::npos);
  BOOST_TEST(eliminate_dead_code(g) == 0);
  (void)dead;
  (void)unused;
}

BOOST_AUTO_TEST_CASE(cse_merges_duplicates_but_not_random_draws) {
  Builder b;
  int x = b.input({6, 5});
  Attrs draw{{"shape", Shape{6, 5}}, {"dtype", std::string("f32")}, {"device", std::string("cpu")}};
  int r1 = b.op("randn", {}, draw), r2 = b.op("randn", {}, draw);
  int e1 = b.op("exp", {x}), e2 = b.op("exp", {x});
  int l1 = b.op("log", {e1}), l2 = b.op("log", {e2});  // equal once the exps are merged
  int s0 = b.op("sum", {x}, {{"dims", std::vector<int64_t>{0}}, {"keepdim", false}});
  int s1 = b.op("sum", {x}, {{"dims", std::vector<int64_t>{1}}, {"keepdim", false}});
  auto full = [&](double v) {
    return b.op("full", {}, {{"shape", Shape{}}, {"value", v}, {"dtype", std::string("f32")},
                             {"device", std::string("cpu")}});
  };
  int z1 = full(0.0), z2 = full(-0.0), z3 = full(0.0);
  b.g.outputs = {b.op("add", {l1, l2}), b.op("add", {e1, e2}), r1, r2, s0, s1, z1, z2, z3};
  Graph g = b.g;

  BOOST_TEST(eliminate_common_subexpressions(g) == 3);  // exp, log, full(0.0)
  check_valid(g);
  BOOST_TEST(count_op(g, "exp") == 1);
  BOOST_TEST(count_op(g, "log") == 1);
  BOOST_TEST(count_op(g, "randn") == 2);
  BOOST_TEST(count_op(g, "sum") == 2);
  BOOST_TEST(count_op(g, "full") == 2);  // 0.0 and -0.0 differ
  BOOST_TEST(g.outputs[2] != g.outputs[3]);
  BOOST_TEST(g.outputs[6] == g.outputs[8]);
  const GraphNode& add = g.nodes[g.values[g.outputs[0]].producer];
  BOOST_TEST(add.inputs[0] == add.inputs[1]);

  std::vector<Tensor> args = random_args(b.g, 11);
  std::vector<Tensor> want = run(b.g, args), got = run(g, args);
  for (size_t k : {0, 1, 4, 5}) check_close(got[k], host_values(want[k]), want[k].shape(), "cse output");
  BOOST_TEST(eliminate_common_subexpressions(g) == 0);
}

BOOST_AUTO_TEST_CASE(fold_views_drops_identity_views_and_collapses_reshape_chains) {
  Builder b;
  int x = b.input({2, 3, 4});
  int v = b.op("view", {x}, {{"shape", Shape{2, -1, 4}}});
  v = b.op("transpose", {v}, {{"dim0", int64_t(1)}, {"dim1", int64_t(-2)}});
  v = b.op("permute", {v}, {{"dims", std::vector<int64_t>{0, 1, 2}}});
  v = b.op("squeeze", {v});
  v = b.op("expand", {v}, {{"shape", Shape{2, 3, 4}}});
  int y = b.op("exp", {v});
  int chain = b.op("view", {b.op("view", {x}, {{"shape", Shape{6, 4}}})}, {{"shape", Shape{4, 6}}});
  int back = b.op("view", {b.op("flatten", {x}, {{"start_dim", int64_t(0)}, {"end_dim", int64_t(-1)}})},
                  {{"shape", Shape{2, 3, 4}}});
  int t = b.op("transpose", {x}, {{"dim0", int64_t(0)}, {"dim1", int64_t(1)}});  // not an identity
  int s = b.op("slice", {x}, {{"dim", int64_t(2)}, {"start", int64_t(0)}, {"end", int64_t(2)}, {"step", int64_t(1)}});
  int kept = b.op("view", {b.op("view", {s}, {{"shape", Shape{6, 2}}})}, {{"shape", Shape{3, 2, 2}}});
  b.g.outputs = {y, chain, back, t, kept};
  Graph g = b.g;

  BOOST_TEST(fold_views(g) == 7);  // five identities and two chains (one then an identity)
  check_valid(g);
  BOOST_TEST(count_op(g, "transpose") == 1);
  BOOST_TEST(count_op(g, "permute") == 0);
  BOOST_TEST(count_op(g, "squeeze") == 0);
  BOOST_TEST(count_op(g, "expand") == 0);
  BOOST_TEST(count_op(g, "flatten") == 0);
  BOOST_TEST(count_op(g, "view") == 3);  // x -> [4, 6], and the chain over the non-contiguous slice
  int xin = g.inputs[0].value;
  BOOST_TEST(g.nodes[g.values[g.outputs[0]].producer].inputs[0] == xin);
  BOOST_TEST(g.nodes[g.values[g.outputs[1]].producer].inputs[0] == xin);
  BOOST_TEST(g.outputs[2] == xin);
  BOOST_TEST(g.text().find("slice") != std::string::npos);

  std::vector<Tensor> args = random_args(b.g, 21);
  std::vector<Tensor> want = run(b.g, args), got = run(g, args);
  for (size_t k = 0; k < want.size(); ++k)
    check_close(got[k], host_values(want[k]), want[k].shape(), "fold_views output " + std::to_string(k));
  BOOST_TEST(fold_views(g) == 0);
}

// Attention's heads viewed out of one [B, T, 3 * H * D] projection: q [B, H, T, D] and k^T
// [B, H, D, T] have batch dims (B, H) that no one stride walks; cuBLAS takes them as pointer
// arrays, so the pass copies nothing for them. Matrices neither row- nor column-major (a slice
// with a step along the row) are copied on CUDA; on the CPU the pass does nothing.
BOOST_AUTO_TEST_CASE(cublas_gemm_operands_copies_what_cublas_cannot_read_on_cuda_only) {
  for (bool cuda : {false, true}) {
    Builder b;
    if (cuda) b.device = Device::cuda(0);
    const int64_t B = 2, T = 8, H = 3, D = 4, M = 5, K = 6, N = 7;
    int qkv = b.input({B, T, 3 * H * D});
    auto head = [&](int64_t i) {  // [B, H, T, D] view of the i-th third
      int s = b.op("slice", {qkv}, {{"dim", int64_t(2)}, {"start", i * H * D}, {"end", (i + 1) * H * D}, {"step", int64_t(1)}});
      int u = b.op("view", {s}, {{"shape", Shape{B, T, H, D}}});
      return b.op("transpose", {u}, {{"dim0", int64_t(1)}, {"dim1", int64_t(2)}});
    };
    int q = head(0), k = head(1);
    int kt = b.op("transpose", {k}, {{"dim0", int64_t(-1)}, {"dim1", int64_t(-2)}});
    int scores = b.op("matmul", {q, kt});
    auto every_other = [&](int x, int64_t n) {  // columns 0, 2, 4, ...: strides (2n, 2)
      return b.op("slice", {x}, {{"dim", int64_t(1)}, {"start", int64_t(0)}, {"end", 2 * n}, {"step", int64_t(2)}});
    };
    int sa = every_other(b.input({M, 2 * K}), K), sb = every_other(b.input({K, 2 * N}), N);
    int strided = b.op("matmul", {sa, sb});
    b.g.outputs = {scores, strided};
    const Value &qv = b.g.values[size_t(q)], &kv = b.g.values[size_t(kt)];
    std::array<bool, 2> heads = cublas_dense_copies(qv.meta.shape, qv.strides, kv.meta.shape, kv.strides, {B, H, T, T});
    BOOST_TEST((!heads[0] && !heads[1]));
    const Value &av = b.g.values[size_t(sa)], &bv = b.g.values[size_t(sb)];
    std::array<bool, 2> steps = cublas_dense_copies(av.meta.shape, av.strides, bv.meta.shape, bv.strides, {M, N});
    BOOST_TEST((steps[0] && steps[1]));
    Graph g = b.g;
    BOOST_TEST_CONTEXT((cuda ? "cuda" : "cpu")) {
      BOOST_TEST(cublas_gemm_operands(g) == (cuda ? 2 : 0));
      check_valid(g);
      BOOST_TEST(count_op(g, "contiguous") == (cuda ? 2 : 0));
      for (const GraphNode& n : g.nodes) {
        if (n.op->name != "matmul" || !cuda) continue;
        const Value &x = g.values[size_t(n.inputs[0])], &y = g.values[size_t(n.inputs[1])];
        bool is_scores = n.outputs[0] == g.outputs[0];
        BOOST_TEST(is_contiguous(x.meta.shape, x.strides) == !is_scores);  // the heads stay views
        std::array<bool, 2> after = cublas_dense_copies(x.meta.shape, x.strides, y.meta.shape, y.strides,
                                                        g.values[size_t(n.outputs[0])].meta.shape);
        BOOST_TEST((!after[0] && !after[1]));  // the eager matmul copies nothing more
      }
      if (!cuda) continue;
      check_same_on_cpu(b.g, g, 31, "cublas_gemm_operands");  // the copies change layouts only
    }
  }
}

// How many of the lines contain `part`.
int lines_with(const std::vector<std::string>& lines, const std::string& part) {
  return int(std::count_if(lines.begin(), lines.end(), [&](const std::string& l) { return l.find(part) != std::string::npos; }));
}

// A Linear's product plus its bias, on CUDA, becomes matmul_bias (cuBLASLt adds the bias in its
// epilogue), also with the bias first and the weight read transposed; not on the CPU, not when the
// product is read elsewhere or returned, not for a per-head batched product (no one matrix for
// the epilogue), and not for a bias of another shape. The folded graph, run on the CPU, gives the
// same values.
BOOST_AUTO_TEST_CASE(cublas_bias_epilogue_folds_a_linears_bias_on_cuda_only) {
  for (bool cuda : {false, true}) {
    Builder b;
    if (cuda) b.device = Device::cuda(0);
    const int64_t B = 2, T = 5, C = 6, N = 7;
    int x = b.input({B, T, C}), w = b.input({N, C}), bias = b.input({N});
    auto wt = b.op("transpose", {w}, {{"dim0", int64_t(0)}, {"dim1", int64_t(1)}});
    int y1 = b.op("add", {b.op("matmul", {x, wt}), bias});      // folded
    int y2 = b.op("add", {bias, b.op("matmul", {x, wt})});      // folded: the bias first
    int shared = b.op("matmul", {x, wt});
    int y3 = b.op("add", {shared, bias});                       // kept: the product is returned too
    int heads = b.input({B, 3, T, C}), hw = b.input({B, 3, C, N});
    int y4 = b.op("add", {b.op("matmul", {heads, hw}), bias});  // kept: a batch of products
    int y5 = b.op("add", {b.op("matmul", {x, wt}), b.input({T, N})});  // kept: not a bias along N
    b.g.outputs = {y1, y2, y3, shared, y4, y5};
    Graph g = b.g;
    BOOST_TEST_CONTEXT((cuda ? "cuda" : "cpu")) {
      std::vector<std::string> notes;
      BOOST_TEST(cublas_bias_epilogue(g, &notes) == (cuda ? 2 : 0));
      check_valid(g);
      BOOST_TEST(count_op(g, "matmul_bias") == (cuda ? 2 : 0));
      // The fusion plan's lines: each add of a product on CUDA, folded or kept and why.
      BOOST_TEST(notes.size() == (cuda ? 5u : 0u));
      BOOST_TEST(lines_with(notes, "bias added in cuBLASLt's epilogue") == (cuda ? 2 : 0));
      BOOST_TEST(lines_with(notes, "kept apart, the product is read elsewhere") == (cuda ? 1 : 0));
      BOOST_TEST(lines_with(notes, "add(matmul [2, 3, 5, 6] x [2, 3, 6, 7], [7]): kept apart, cuBLASLt cannot read") ==
                 (cuda ? 1 : 0));
      BOOST_TEST(lines_with(notes, "kept apart, the other operand is not a bias") == (cuda ? 1 : 0));
      BOOST_TEST(count_op(g, "matmul") == (cuda ? 3 : 5));
      if (!cuda) continue;
      check_same_on_cpu(b.g, g, 33, "cublas_bias_epilogue");
    }
  }
}

// With a backend that fuses, a Linear's sum read only by pointwise ops (a residual add, an erf
// GELU) keeps its add, which their pipeline computes; a sum read by a view or a tanh GELU (whose
// epilogue takes the bias too) or returned still folds. The graph, run on the CPU, gives the same
// values.
BOOST_AUTO_TEST_CASE(cublas_bias_epilogue_leaves_the_bias_to_pointwise_readers_when_ops_fuse) {
  Builder b;
  b.device = Device::cuda(0);
  int x = b.input({4, 6}), w = b.input({6, 8}), bias = b.input({8}), res = b.input({4, 8});
  auto linear = [&] { return b.op("add", {b.op("matmul", {x, w}), bias}); };
  int residual = b.op("add", {linear(), res});                           // kept: a pointwise reader
  int erf = b.op("gelu", {linear()}, {{"approximate", std::string("none")}});  // kept: erf GELU
  int tanh = b.op("gelu", {linear()}, {{"approximate", std::string("tanh")}});  // folded: the GELU epilogue's
  int viewed = b.op("transpose", {linear()}, {{"dim0", int64_t(0)}, {"dim1", int64_t(1)}});  // folded
  int returned = linear();                                               // folded
  b.g.outputs = {residual, erf, tanh, viewed, returned};
  Graph g = b.g;
  std::vector<std::string> notes;
  BOOST_TEST(cublas_bias_epilogue(g, &notes, /*fused_readers=*/true) == 3);
  check_valid(g);
  BOOST_TEST(lines_with(notes, "kept apart, its readers are pointwise: the bias is added in their pipeline") == 2);
  BOOST_TEST(count_op(g, "matmul_bias") == 3);
  check_same_on_cpu(b.g, g, 35, "cublas_bias_epilogue with fused readers");
  Graph unfused = b.g;
  BOOST_TEST(cublas_bias_epilogue(unfused, nullptr, /*fused_readers=*/false) == 5);
}

// GELU's tanh form moves into the cuBLASLt GEMM beside it, on CUDA only: a Linear's product,
// bias and GELU become matmul_bias_gelu, writing GELU's input too (aux) only where something else
// reads it; gelu_backward of a product read by nothing else becomes matmul_gelu_backward. Kept:
// the erf form, a product that is also returned, and GELU's input in rows not a multiple of 8
// long (cuBLASLt's rule for aux). The folded graph, run on the CPU, gives the same values.
BOOST_AUTO_TEST_CASE(cublas_gelu_epilogues_fold_tanh_gelu_on_cuda_only) {
  const Attrs tanh{{"approximate", std::string("tanh")}}, erf{{"approximate", std::string("none")}};
  const Attrs swap{{"dim0", int64_t(0)}, {"dim1", int64_t(1)}};
  for (bool cuda : {false, true}) {
    Builder b;
    if (cuda) b.device = Device::cuda(0);
    const int64_t B = 2, T = 5, C = 6, N = 16, K2 = 9;
    int x = b.input({B, T, C}), w = b.input({N, C}), bias = b.input({N});
    auto linear = [&](int weight, int bias_) { return b.op("add", {b.op("matmul", {x, b.op("transpose", {weight}, swap)}), bias_}); };
    int y1 = b.op("gelu", {linear(w, bias)}, tanh);  // folded, GELU's input not kept
    int pre = linear(w, bias);
    int y2 = b.op("gelu", {pre}, tanh);  // folded with aux: the backward reads pre
    int gy = b.input({B, T, K2}), w2 = b.input({K2, N});
    int d1 = b.op("gelu_backward", {b.op("matmul", {gy, w2}), pre}, tanh);  // folded
    int y3 = b.op("gelu", {linear(w, bias)}, erf);                          // kept: the erf form
    int w12 = b.input({12, C}), bias12 = b.input({12}), w2_12 = b.input({K2, 12});
    int pre12 = linear(w12, bias12);
    int y4 = b.op("gelu", {pre12}, tanh);                                        // kept: aux rows of 12
    int d2 = b.op("gelu_backward", {b.op("matmul", {gy, w2_12}), pre12}, tanh);  // kept: the same
    int shared = b.op("matmul", {gy, w2});
    int d3 = b.op("gelu_backward", {shared, pre}, tanh);  // kept: the product is returned too
    b.g.outputs = {y1, y2, d1, y3, y4, d2, d3, shared};
    Graph g = b.g;
    BOOST_TEST_CONTEXT((cuda ? "cuda" : "cpu")) {
      BOOST_TEST(cublas_bias_epilogue(g) == (cuda ? 4 : 0));
      std::vector<std::string> notes;
      BOOST_TEST(cublas_gelu_epilogues(g, &notes) == (cuda ? 3 : 0));
      BOOST_TEST(notes.size() == (cuda ? 7u : 0u));
      BOOST_TEST(lines_with(notes, "): GELU computed in cuBLASLt's epilogue") == (cuda ? 2 : 0));
      BOOST_TEST(lines_with(notes, "gelu_backward(matmul [2, 5, 9] x [9, 16]): GELU's gradient taken in cuBLASLt's epilogue") ==
                 (cuda ? 1 : 0));
      BOOST_TEST(lines_with(notes, "kept apart, erf GELU") == (cuda ? 1 : 0));
      BOOST_TEST(lines_with(notes, "kept apart, GELU's input is not stored as dense rows a multiple of 8 long") ==
                 (cuda ? 2 : 0));
      BOOST_TEST(lines_with(notes, "kept apart, the product is read elsewhere") == (cuda ? 1 : 0));
      check_valid(g);
      BOOST_TEST(count_op(g, "matmul_bias_gelu") == (cuda ? 2 : 0));
      BOOST_TEST(count_op(g, "matmul_gelu_backward") == (cuda ? 1 : 0));
      BOOST_TEST(count_op(g, "gelu") == (cuda ? 2 : 4));
      BOOST_TEST(count_op(g, "gelu_backward") == (cuda ? 2 : 3));
      if (!cuda) continue;
      int with_aux = 0;
      for (const GraphNode& n : g.nodes)
        if (n.op->name == "matmul_bias_gelu") with_aux += n.outputs.size() == 2;
      BOOST_TEST(with_aux == 1);
      check_same_on_cpu(b.g, g, 35, "cublas_gelu_epilogues");
    }
  }
}

// A Linear's bias gradient, a sum of dy over every dim but the last, is summed on CUDA in the
// epilogue of its weight gradient's GEMM, matmul(dy.flatten(0, -2).t(), x): both become
// matmul_bias_grad at the earlier one's place, whether the sum or the product comes first. Kept:
// the CPU, a sum over other dims, a product that reads dy untransposed. Same values on the CPU.
BOOST_AUTO_TEST_CASE(cublas_bias_grad_epilogues_fold_a_linears_bias_gradient_on_cuda_only) {
  for (bool cuda : {false, true}) {
    Builder b;
    if (cuda) b.device = Device::cuda(0);
    const int64_t B = 2, T = 5, C = 6, N = 8;
    auto flat = [&](int v) { return b.op("flatten", {v}, {{"start_dim", int64_t(0)}, {"end_dim", int64_t(-2)}}); };
    auto t = [&](int v) { return b.op("transpose", {v}, {{"dim0", int64_t(0)}, {"dim1", int64_t(1)}}); };
    auto sum = [&](int v, std::vector<int64_t> dims) { return b.op("sum", {v}, {{"dims", dims}, {"keepdim", true}}); };
    int x = b.input({B, T, C}), dy = b.input({B, T, N}), dy2 = b.input({B, T, N}), dy3 = b.input({B, T, N});
    int db = sum(dy, {0, 1});                           // folded: the sum first
    int dw = b.op("matmul", {t(flat(dy)), flat(x)});
    int dw2 = b.op("matmul", {t(flat(dy2)), flat(x)});  // folded: the product first
    int db2 = sum(dy2, {0, 1});
    int db3 = sum(dy3, {1, 2});                                       // kept: other dims
    int y3 = b.op("matmul", {flat(dy3), b.input({N, C})});           // kept: dy3 read as it is
    int db4 = sum(dy3, {0, 1});                                       // kept: no product reads dy3^T
    b.g.outputs = {db, dw, dw2, db2, db3, y3, db4};
    Graph g = b.g;
    BOOST_TEST_CONTEXT((cuda ? "cuda" : "cpu")) {
      std::vector<std::string> notes;
      BOOST_TEST(cublas_bias_grad_epilogues(g, &notes) == (cuda ? 2 : 0));
      BOOST_TEST(notes.size() == (cuda ? 3u : 0u));
      BOOST_TEST(lines_with(notes, "over its leading dims: summed in the epilogue (BGRADB) of matmul [8, 10] x [10, 6]") ==
                 (cuda ? 2 : 0));
      BOOST_TEST(lines_with(notes, "sum of [2, 5, 8] over its leading dims: kept apart, no GEMM reads dy transposed") ==
                 (cuda ? 1 : 0));
      check_valid(g);
      BOOST_TEST(count_op(g, "matmul_bias_grad") == (cuda ? 2 : 0));
      BOOST_TEST(count_op(g, "sum") == (cuda ? 2 : 4));
      BOOST_TEST(count_op(g, "matmul") == (cuda ? 1 : 3));
      if (!cuda) continue;
      check_same_on_cpu(b.g, g, 37, "cublas_bias_grad_epilogues");
    }
  }
}

BOOST_AUTO_TEST_CASE(fold_views_keeps_symbolic_shapes_exact) {
  Builder b;
  int s0 = b.g.shape_env->new_symbol(5, "arg 0 dim 0");
  int x = b.g.add_input(InputKind::argument, 0, "x", {{5, 8}, f32, Device::cpu()},
                        {SymDim::symbol(s0), SymDim::constant(8)}, contiguous_strides({5, 8}));
  int same = b.op("view", {x}, {{"shape", Shape{-1, 8}}});
  int other = b.op("view", {x}, {{"shape", Shape{-1, 4}}});
  b.g.outputs = {b.op("neg", {same}), other};
  BOOST_TEST(fold_views(b.g) == 1);
  BOOST_TEST(count_op(b.g, "view") == 1);
  BOOST_TEST(to_string(b.g.values[b.g.outputs[1]].sym) == "[2*s0, 4]");
}

BOOST_AUTO_TEST_CASE(decompose_softmax_and_log_softmax_match_composites_and_reference) {
  struct Case { Shape shape; int64_t dim; DType dtype; };
  for (const Case& c : std::vector<Case>{{{5, 37}, -1, f32}, {{4, 3, 6}, 1, f32}, {{7}, 0, f64},
                                          {{3, 9}, 1, f16}, {{2, 5}, 0, i32}, {{}, 0, f32}}) {
    for (const char* op : {"softmax", "log_softmax"}) {
      Builder b;
      b.g.outputs = {b.op(op, {b.input(c.shape, c.dtype)}, {{"dim", c.dim}})};
      std::string what = std::string(op) + " " + to_string(c.shape) + " dim " + std::to_string(c.dim) + " " +
                         std::string(name(c.dtype));
      Graph d = decompose_and_compare(b.g, 31 + c.shape.size(), what);
      BOOST_TEST(d.values[d.outputs[0]].meta.dtype == b.g.values[b.g.outputs[0]].meta.dtype);
      if (c.dtype != f32 || c.shape.size() != 2 || c.dim != -1) continue;
      Tensor x = random_tensor(c.shape, f32, 41, -6, 6);
      Tensor got = run(d, {x})[0];
      bool log_space = std::string(op) == "log_softmax";
      Values want = along_rows(host_values(x), c.shape[1], [&](const Values& r) {
        double m = *std::max_element(r.begin(), r.end()), s = 0;
        for (double e : r) s += std::exp(e - m);
        Values out;
        for (double e : r) out.push_back(log_space ? e - m - std::log(s) : std::exp(e - m) / s);
        return out;
      });
      check_close(got, want, c.shape, {2e-5, 1e-5}, what + " vs double loop");
    }
  }
  Builder empty;  // rows of size 0: max has no identity there, so softmax stays one op
  empty.g.outputs = {empty.op("softmax", {empty.input({3, 0})}, {{"dim", int64_t(1)}})};
  BOOST_TEST(decompose(empty.g, {"softmax"}) == 0);
  BOOST_TEST(count_op(empty.g, "softmax") == 1);
}

BOOST_AUTO_TEST_CASE(decompose_layer_norm_matches_composite_and_reference) {
  for (bool affine : {true, false}) {
    Builder b;
    Shape shape{3, 5, 8};
    Attrs a{{"normalized_shape", Shape{8}}, {"eps", 1e-5}};
    int x = b.input(shape);
    std::vector<int> ins{x};
    if (affine) ins = {x, b.input({8}), b.input({8})};
    b.g.outputs = {b.op("layer_norm", ins, a)};
    Graph d = decompose_and_compare(b.g, 51, affine ? "layer_norm affine" : "layer_norm");
    BOOST_TEST(d.text().find("rsqrt") != std::string::npos);

    std::vector<Tensor> args = random_args(b.g, 61);
    Values w = affine ? host_values(args[1]) : Values(8, 1.0), bias = affine ? host_values(args[2]) : Values(8, 0.0);
    Values want = along_rows(host_values(args[0]), 8, [&](const Values& r) {
      double mean = 0, var = 0;
      for (double e : r) mean += e / r.size();
      for (double e : r) var += (e - mean) * (e - mean) / r.size();
      Values out;
      for (size_t i = 0; i < r.size(); ++i) out.push_back((r[i] - mean) / std::sqrt(var + 1e-5) * w[i] + bias[i]);
      return out;
    });
    check_close(run(d, args)[0], want, shape, {2e-5, 1e-5}, "layer_norm vs double loop");
  }
  Builder multi;  // normalized over the last two dims
  multi.g.outputs = {multi.op("layer_norm", {multi.input({4, 2, 6})},
                              {{"normalized_shape", Shape{2, 6}}, {"eps", 1e-3}})};
  decompose_and_compare(multi.g, 71, "layer_norm over [2, 6]");
}

BOOST_AUTO_TEST_CASE(decompose_gelu_tanh_and_silu_and_leaves_the_rest) {
  for (const char* op : {"gelu", "silu"}) {
    Builder b;
    Attrs a;
    if (std::string(op) == "gelu") a.set("approximate", std::string("tanh"));
    b.g.outputs = {b.op(op, {b.input({4, 33})}, a)};
    decompose_and_compare(b.g, 81, op);
  }
  Builder b;  // gelu's exact form needs erf, which is no op: it stays; decompose only what is asked
  int x = b.input({2, 8});
  int g1 = b.op("gelu", {x}, {{"approximate", std::string("none")}});
  int sm = b.op("softmax", {g1}, {{"dim", int64_t(-1)}});
  b.g.outputs = {b.op("silu", {sm})};
  BOOST_TEST(decompose(b.g, {"gelu", "softmax"}) == 1);
  check_valid(b.g);
  BOOST_TEST(count_op(b.g, "gelu") == 1);
  BOOST_TEST(count_op(b.g, "softmax") == 0);
  BOOST_TEST(count_op(b.g, "silu") == 1);
  BOOST_TEST(count_op(b.g, "exp") == 1);
}

BOOST_AUTO_TEST_CASE(padded_cat_sums_become_one_cat) {
  // The gradient of q, k, v sliced out of one [2, 3, 12] projection: three zero-padded cats summed.
  Builder b;
  int dq = b.input({2, 3, 4}), dk = b.input({2, 3, 4}), dv = b.input({2, 3, 4}), other = b.input({2, 3, 10});
  auto zeros = [&](int64_t width) {
    return b.op("full", {}, {{"shape", Shape{2, 3, width}}, {"value", 0.0}, {"dtype", std::string("f32")}, {"device", std::string("cpu")}});
  };
  Attrs last{{"dim", int64_t(2)}};
  int cv = b.op("cat", {zeros(8), dv}, last);
  int cq = b.op("cat", {dq, zeros(8)}, last);
  int ck = b.op("cat", {zeros(4), dk, zeros(4)}, last);
  int sum = b.op("add", {b.op("add", {cv, cq}), ck});
  // Pieces that straddle the other cat's cuts are sliced: cat(wide, 0) + cat(0, other), cut at 6
  // and at 2.
  int wide = b.input({2, 3, 6});
  int straddle = b.op("add", {b.op("cat", {wide, zeros(6)}, last), b.op("cat", {zeros(2), other}, last)});
  b.g.outputs = {sum, straddle};
  Graph before = b.g;
  BOOST_TEST(merge_padded_cat_sums(b.g) == 3);
  check_valid(b.g);
  const GraphNode& merged = b.g.nodes[size_t(b.g.values[size_t(b.g.outputs[0])].producer)];
  BOOST_TEST(merged.op->name == "cat");
  BOOST_TEST(merged.inputs.size() == 3u);  // cat(dq, dk, dv): no zeros, no adds
  std::vector<Tensor> args = {random_tensor({2, 3, 4}, f32, 91), random_tensor({2, 3, 4}, f32, 92),
                              random_tensor({2, 3, 4}, f32, 93), random_tensor({2, 3, 10}, f32, 94),
                              random_tensor({2, 3, 6}, f32, 95)};
  std::vector<Tensor> want = run(before, args), got = run(b.g, args);
  check_close(got[0], host_values(want[0]), {2, 3, 12}, "cat(dq, dk, dv)");
  check_close(got[1], host_values(want[1]), {2, 3, 12}, "sliced pieces");
}
