// kiln's CUDA schedule without a GPU: graphs whose values live on cuda:0 (built by hand: no
// device memory is needed to lower and compile them) go through the fusion plan, lowering and
// schedules/gpu_schedule.h, and are compiled for the CUDA target to PTX inside an object. Each
// region must compile, launch at least one CUDA kernel, and leave no stage on the host (Halide
// would copy buffers to the host and back; its copies to the device are no-ops for buffers that
// are already there). Running them is tests/cuda/'s job. KILN_DEBUG_GPU_TEST=1 prints each
// region's ops before it compiles (a crash inside LLVM then names the region) and keeps each
// region's lowered statement (the path is printed).
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <unistd.h>

#include "bench/zoo.h"
#include "support/graph_builder.h"
#include "support/halide_ops.h"
#include "support/fuzz_program.h"
#include "support/reference.h"
#include "support/scoped_env.h"
#include "dsl/ops/math_functions.h"
#include "graph/backend.h"
#include "graph/graph.h"
#include "graph/passes.h"
#include "schedules/fusion.h"
#include "schedules/gpu_bounds_check.h"
#include "schedules/gpu_launch_check.h"
#include "schedules/gpu_math.h"
#include "schedules/gpu_schedule.h"
#include "schedules/lower_region.h"
#include "schedules/region_schedule.h"
#include "schedules/region_signature.h"
#include "schedules/shared_library.h"

using namespace kiln;
using kiln::test::Builder;

namespace {

const Device kCuda = Device::cuda(0);

// Lowers, schedules and compiles every region of g for CUDA; returns the regions' statements.
// A graph of eager steps only (a fuzz program that is one matmul) has none to return.
// kiln's GPU schedule with the region's own tunables where KILN_SCHEDULE_DIR has a file for it,
// as the halide backend schedules a CUDA region (RegionStep::own_schedule).
void schedule_as_the_backend_does(const Graph& g, const Region& r, LoweredRegion& lowered) {
  schedule_gpu(g, r, lowered, row_tuning_of(region_schedule_of(g, r, true)));
}

enum class Regions { expected, optional };
std::vector<std::string> compile_for_cuda(Graph& g, const std::string& what, Regions regions = Regions::expected) {
  std::vector<std::string> stmts;
  static int calls = 0;
  auto dir = std::filesystem::temp_directory_path() /
             ("kiln-gpu-schedule-" + std::to_string(::getpid()) + "-" + std::to_string(calls++));
  std::filesystem::create_directories(dir);
  int index = 0;
  for (PlannedStep& step : plan_fusion(g)) {
    if (step.node >= 0) continue;
    if (std::getenv("KILN_DEBUG_GPU_TEST")) {
      std::cerr << "region " << index << ":";
      for (int n : step.region.nodes) std::cerr << " " << g.nodes[size_t(n)].op->name << value_type_str(g.values[size_t(g.nodes[size_t(n)].outputs[0])]);
      std::cerr << std::endl;
    }
    LoweredRegion lowered = lower_region(g, step.region);
    Halide::Pipeline p = cuda_pipeline(lowered.outputs);  // as the halide backend builds CUDA pipelines
    schedule_as_the_backend_does(g, step.region, lowered);
    // The backend's launch check runs inside every CUDA compile (region_library.cpp): its cost is
    // part of what is tested here.
    std::map<std::string, int64_t> sizes = region_sizes(g, step.region, lowered);
    record_gpu_launches(p, sizes);
    // Every load and store inside its buffer at the traced sizes (gpu_bounds_check.h).
    std::shared_ptr<const GpuBounds> bounds = record_gpu_bounds(p, sizes);
    std::string base = (dir / ("r" + std::to_string(index++))).string();
    std::vector<Halide::Argument> args = pipeline_arguments(step.region, lowered);
    try {
      p.compile_to_lowered_stmt(base + ".stmt", args, Halide::Text, aot_target(true));
    } catch (const std::exception& e) {
      BOOST_FAIL(what << ": lowering for CUDA failed: " << e.what());
    }
    try {
      compile_region_object(p, args, "kiln_region", base + ".o", true);
    } catch (const std::exception& e) {
      BOOST_FAIL(what << ": compiling for CUDA failed: " << e.what());
    }
    for (const std::string& w : bounds->outside) BOOST_ERROR(what << ": region " << index - 1 << ": " << w);
    stmts.push_back(test::file_bytes(base + ".stmt"));
    if (std::getenv("KILN_DEBUG_GPU_TEST")) std::cerr << "  statement: " << base << ".stmt" << std::endl;
  }
  if (!std::getenv("KILN_DEBUG_GPU_TEST")) std::filesystem::remove_all(dir);
  if (regions == Regions::expected) BOOST_TEST_CONTEXT(what) { BOOST_TEST(!stmts.empty()); }
  return stmts;
}

int count(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

void check_on_device(Graph& g, const std::string& what, Regions regions = Regions::expected) {
  for (const std::string& s : compile_for_cuda(g, what, regions)) {
    BOOST_TEST_CONTEXT(what) {
      BOOST_TEST(count(s, "halide_cuda_run") >= 1);
      BOOST_TEST(count(s, "halide_copy_to_host") == 0, what << ": a stage runs on the host");
      // libdevice's functions exist on the device only (the host's code follows the kernels' PTX).
      size_t host = s.find("external_plus_metadata func");
      BOOST_TEST((host == std::string::npos || count(s.substr(host), "__nv_") == 0),
                 what << ": the host's code calls a libdevice function");
    }
  }
}

// A backend that keeps every graph it is given and runs it op by op: captures a model's graphs on
// the CPU, to compile them for CUDA here.
class KeepGraphs final : public Backend {
 public:
  std::vector<Graph> graphs;
  std::string_view name() const override { return "keep_graphs"; }
  // The halide backend's graph: its decompositions, and the rewrites for backends that fuse.
  std::set<std::string> decompositions() const override { return backend("halide").decompositions(); }
  bool fuses_ops() const override { return true; }
  std::shared_ptr<CompiledGraph> compile(std::shared_ptr<const Graph> g, const BackendOptions& o) override {
    graphs.push_back(*g);
    return backend("eager").compile(g, o);
  }
};

KeepGraphs& keep_graphs() {
  static auto* b = [] {
    auto k = std::make_shared<KeepGraphs>();
    register_backend(k);
    return k.get();
  }();
  return *b;
}

// The graph with every value moved to cuda:0, as if the model had been traced there.
Graph on_cuda(Graph g) {
  move_graph_to(g, kCuda);
  return g;
}

}  // namespace

BOOST_AUTO_TEST_CASE(zoo_models_compile_for_cuda) {
  NoGradGuard no_grad;
  for (const std::string& name : zoo::zoo_names()) {
    keep_graphs().graphs.clear();
    zoo::ZooModel m = zoo::make_zoo_model(name, zoo::ZooSize::bench);
    zoo::ZooFunction f = zoo::compile_zoo_model(m, {.backend = "keep_graphs"});
    f(m.make_inputs());
    BOOST_TEST_REQUIRE(!keep_graphs().graphs.empty());
    for (Graph& g : keep_graphs().graphs) {
      Graph cuda = on_cuda(g);
      check_on_device(cuda, name);
    }
  }
}

// The same under bf16 autocast: regions that read and write bf16 (16-bit integers in Halide, as
// CUDA's JIT crashed on Halide's BFloat(16)) around cuBLAS's bf16 products.
BOOST_AUTO_TEST_CASE(zoo_models_under_bf16_autocast_compile_for_cuda) {
  NoGradGuard no_grad;
  AutocastGuard autocast(Device::cpu(), DType::bf16);  // traced on the CPU, then moved to CUDA
  for (const std::string& name : zoo::zoo_names()) {
    keep_graphs().graphs.clear();
    zoo::ZooModel m = zoo::make_zoo_model(name, zoo::ZooSize::bench);
    zoo::ZooFunction f = zoo::compile_zoo_model(m, {.backend = "keep_graphs"});
    f(m.make_inputs());
    BOOST_TEST_REQUIRE(!keep_graphs().graphs.empty());
    for (Graph& g : keep_graphs().graphs) {
      bool bf16 = false, matmul = false;
      for (const Value& v : g.values) bf16 = bf16 || v.meta.dtype == DType::bf16;
      for (const GraphNode& n : g.nodes) matmul = matmul || n.op->autocast == AutocastRule::lower_precision;
      BOOST_TEST(bf16 == matmul, name << ": a product under autocast, yet no bf16 value in the graph");
      Graph cuda = on_cuda(g);
      check_on_device(cuda, name + " (bf16 autocast)");
    }
  }
}

BOOST_AUTO_TEST_CASE(pointwise_chains) {
  for (Shape s : {Shape{1024, 1024}, Shape{37, 53}, Shape{7}, Shape{}}) {
    Builder b(kCuda);
    int x = b.input(s), y = b.input(s);
    b.g.outputs = {b.op("add", {b.op("mul", {x, b.scalar(2.0)}), y})};
    check_on_device(b.g, "a*2+b " + to_string(s));
  }
  Builder b(kCuda);  // a transposed read and a broadcast
  int x = b.input({64, 96}), r = b.input({64});
  int t = b.op("transpose", {x}, {{"dim0", int64_t(0)}, {"dim1", int64_t(1)}});
  b.g.outputs = {b.op("add", {b.op("contiguous", {t}), r})};
  check_on_device(b.g, "x.t() + row");
}

BOOST_AUTO_TEST_CASE(row_ops_and_row_reductions) {
  for (Shape s : {Shape{64, 1000}, Shape{1000, 8}, Shape{4, 16, 256}, Shape{1000}}) {
    Builder b(kCuda);
    int x = b.input(s);
    int sm = b.op("softmax", {x}, {{"dim", int64_t(-1)}});
    b.g.outputs = {b.op("log_softmax", {b.op("add", {sm, x})}, {{"dim", int64_t(-1)}})};
    check_on_device(b.g, "softmax chain " + to_string(s));
  }
  Builder b(kCuda);
  int x = b.input({128, 512}), w = b.input({512}), bias = b.input({512});
  int ln = b.op("layer_norm", {x, w, bias}, {{"normalized_shape", std::vector<int64_t>{512}}, {"eps", 1e-5}});
  int s = b.op("sum", {ln}, {{"dims", std::vector<int64_t>{1}}, {"keepdim", false}});
  int v = b.op("var", {x}, {{"dims", std::vector<int64_t>{1}}, {"correction", int64_t(1)}, {"keepdim", true}});
  int l = b.op("logsumexp", {x}, {{"dims", std::vector<int64_t>{-1}}, {"keepdim", false}});
  int a = b.op("argmax", {x}, {{"dims", std::vector<int64_t>{1}}, {"keepdim", false}});
  b.g.outputs = {ln, s, v, l, a};
  check_on_device(b.g, "layer_norm, sum, var, logsumexp, argmax over rows");
}

BOOST_AUTO_TEST_CASE(short_rows_run_a_warp_per_row) {  // tiny_gpt's sizes
  Builder b(kCuda);
  int x = b.input({4, 16, 64}), w = b.input({64}), bias = b.input({64});
  int ln = b.op("layer_norm", {x, w, bias}, {{"normalized_shape", std::vector<int64_t>{64}}, {"eps", 1e-5}});
  int s = b.input({4, 4, 16, 16});
  int sm = b.op("softmax", {b.op("mul", {s, b.scalar(0.25)})}, {{"dim", int64_t(-1)}});
  int logits = b.input({4, 16, 11});
  int ls = b.op("log_softmax", {logits}, {{"dim", int64_t(-1)}});
  b.g.outputs = {ln, sm, ls};
  check_on_device(b.g, "layer_norm over 64, softmax over 16 and 11");
}

BOOST_AUTO_TEST_CASE(column_and_full_reductions) {
  for (Shape s : {Shape{4096, 16}, Shape{64, 3000}, Shape{9, 5}}) {
    Builder b(kCuda);
    int x = b.input(s);
    int c = b.op("sum", {x}, {{"dims", std::vector<int64_t>{0}}, {"keepdim", false}});
    int m = b.op("max", {x}, {{"dims", std::vector<int64_t>{0}}, {"keepdim", false}});
    int f = b.op("sum", {x}, {{"dims", std::vector<int64_t>{}}, {"keepdim", false}});
    int sm = b.op("softmax", {x}, {{"dim", int64_t(0)}});
    // Two sums that read one another (the max, then the sum of exps; the mean, then the squares):
    // split into chunks of rows when the columns are few (4096 rows of 16).
    int l = b.op("logsumexp", {x}, {{"dims", std::vector<int64_t>{0}}, {"keepdim", false}});
    int v = b.op("var", {x}, {{"dims", std::vector<int64_t>{0}}, {"correction", int64_t(1)}, {"keepdim", true}});
    b.g.outputs = {c, m, f, sm, l, v};
    check_on_device(b.g, "columns and all " + to_string(s));
  }
  Builder b(kCuda);
  int x = b.input({3, 1 << 20});
  b.g.outputs = {b.op("mean", {x}, {{"dims", std::vector<int64_t>{}}, {"keepdim", false}})};
  check_on_device(b.g, "mean of 3M elements");
}

namespace {

// The kernels of g's one region at its traced sizes, and its lowered statement.
std::pair<std::vector<GpuLaunch>, std::string> launches_of(Graph& g) {
  std::vector<PlannedStep> plan = plan_fusion(g);
  BOOST_TEST_REQUIRE(plan.size() == 1u);
  LoweredRegion lowered = lower_region(g, plan[0].region);
  Halide::Pipeline p = cuda_pipeline(lowered.outputs);  // as the halide backend builds CUDA pipelines
  schedule_as_the_backend_does(g, plan[0].region, lowered);
  auto launches = record_gpu_launches(p, region_sizes(g, plan[0].region, lowered));
  auto path = std::filesystem::temp_directory_path() / ("kiln-gpu-launches-" + std::to_string(::getpid()) + ".stmt");
  p.compile_to_lowered_stmt(path.string(), pipeline_arguments(plan[0].region, lowered), Halide::Text, aot_target(true));
  std::string stmt = test::file_bytes(path.string());
  if (std::getenv("KILN_DEBUG_GPU_TEST")) std::cerr << stmt;
  std::filesystem::remove(path);
  return {*launches, stmt};
}

}  // namespace

// The PTX of the kernel whose entry name contains `part` (up to the next kernel).
std::string kernel_ptx(const std::string& stmt, const std::string& part) {
  for (size_t at = stmt.find(".entry"); at != std::string::npos; at = stmt.find(".entry", at + 1)) {
    size_t line_end = stmt.find('\n', at);
    if (stmt.substr(at, line_end - at).find(part) == std::string::npos) continue;
    return stmt.substr(at, stmt.find(".entry", at + 1) - at);
  }
  BOOST_ERROR("no kernel named *" << part << "* in the PTX");
  return "";
}

// GPT-2's attention softmax: the scaled, causally masked scores of [8, 12, 1024, 1024] run a warp
// per row, one row a block (warp 2496 GB/s against block 2035 on one H200; one row a block 2528
// against 2461 with 8); in f32 each lane first loads its 32 scores of the row into registers, so
// the three passes (max, sum, output) read memory once: 32 loads a lane, none spilled. The mask
// is computed from positions in the region, as compiled GPT-2 runs it (fusion.cpp): no lane loads
// it (as a [T, T] bool input, each pass loaded it again, 96 loads a lane). Attention's v, copied
// to [B, H, T, D] in the same region, moves 4 floats a thread: the aranges' i64 do not narrow it.
// Each exp is two instructions (a multiply and ex2.approx): with libdevice's expf the kernel
// issued 67 instructions a score, more than its bytes take to move on an H200; now about 31.
// In f64 a block of 256 threads per row (Halide 14 has no 64-bit warp shuffles).
BOOST_AUTO_TEST_CASE(attention_rows_run_a_warp_per_row) {
  for (DType t : {DType::f32, DType::f64}) {
    Builder b(kCuda);
    int x = b.input({8, 12, 1024, 1024}, t), v = b.input({8, 1024, 12, 64}, t);
    Attrs range{{"start", 0.0}, {"end", 1024.0}, {"step", 1.0}, {"dtype", std::string("i64")}, {"device", std::string("cuda:0")}};
    int pos = b.op("arange", {}, range);
    int mask = b.op("ge", {b.op("unsqueeze", {pos}, {{"dim", int64_t(1)}}), b.op("unsqueeze", {pos}, {{"dim", int64_t(0)}})});
    int scaled = b.op("mul", {x, b.scalar(0.125)});
    int masked = b.op("where", {mask, scaled, b.scalar(-1e30)});
    int heads = b.op("contiguous", {b.op("transpose", {v}, {{"dim0", int64_t(1)}, {"dim1", int64_t(2)}})});
    b.g.outputs = {b.op("softmax", {masked}, {{"dim", int64_t(-1)}}), heads};
    auto [launches, stmt] = launches_of(b.g);
    if (t == DType::f32) {
      std::string softmax = kernel_ptx(stmt, "softmax");
      BOOST_TEST(count(softmax, "shfl.sync") >= 1);
      BOOST_TEST(count(softmax, "ld.global.f32") + count(softmax, "ld.global.nc.f32") == 32);
      BOOST_TEST(count(softmax, "ld.global.u8") + count(softmax, "ld.global.nc.u8") == 0);
      BOOST_TEST(count(softmax, "ld.local") + count(softmax, "st.local") == 0);
      // exp as ex2.approx (gpu_math.h), not libdevice's range-reduced polynomial.
      BOOST_TEST(count(softmax, "ex2.approx.ftz.f32") == 64);  // two exps a score: the sum's and the output's
      BOOST_TEST(count(softmax, "cvt.rmi") == 0);
    } else {
      BOOST_TEST(count(stmt, "shfl.sync") == 0);
    }
    for (const GpuLaunch& k : launches) {
      if (k.loop.find("softmax") != std::string::npos)
        BOOST_TEST(k.threads == (t == DType::f32 ? 32 : 256), k.loop << ": " << k.threads << " threads a block");
      else if (t == DType::f32)
        BOOST_TEST(k.work() * 4 == 8 * 12 * 1024 * 64, k.loop << ": " << k.work() << " threads and steps");
    }
  }
}

// GPT-2's layer norm over rows of 768: a warp per row with the row of x and the weight loaded once
// into the lanes' registers (24 loads a lane each; the bias would pass the 8 KiB of a warp's
// staging and is read where it is used, also once), so the mean, the variance and the output
// read no row twice: 72 loads of f32 in all, none spilled.
// (Until 2026-12-02 the weight and bias kept the row out of registers, and each pass read it.)
BOOST_AUTO_TEST_CASE(layer_norm_rows_stage_weight_and_bias_in_registers) {
  Builder b(kCuda);
  int x = b.input({8, 1024, 768}), w = b.input({768}), bias = b.input({768});
  b.g.outputs = {b.op("layer_norm", {x, w, bias}, {{"normalized_shape", std::vector<int64_t>{768}}, {"eps", 1e-5}})};
  auto [launches, stmt] = launches_of(b.g);
  int loads = count(stmt, "ld.global.f32") + count(stmt, "ld.global.nc.f32");
  BOOST_TEST(loads == 72, loads << " loads of f32");
  BOOST_TEST(count(stmt, "ld.local") + count(stmt, "st.local") == 0);
  for (const GpuLaunch& k : launches) BOOST_TEST(k.threads == 32, k.loop << ": " << k.threads << " threads a block");
}

// A layer_norm weight's gradient: 768 columns summed over 8192 rows. The rows are summed in
// chunks by enough threads to hide the loads' latency (24576 threads had 32 chunks of 256 rows).
BOOST_AUTO_TEST_CASE(column_sums_of_few_columns_spread_their_rows) {
  Builder b(kCuda);
  int x = b.input({8192, 768}), dy = b.input({8192, 768});
  b.g.outputs = {b.op("sum", {b.op("mul", {x, dy})}, {{"dims", std::vector<int64_t>{0}}, {"keepdim", false}})};
  auto [launches, stmt] = launches_of(b.g);
  int64_t widest = 0;
  for (const GpuLaunch& k : launches) widest = std::max(widest, k.blocks * k.threads);
  BOOST_TEST(widest >= 65536);
  BOOST_TEST(narrow_gpu_launches(launches).empty());
}

// GPT-2's layer norm backward as the compiled step traces it (autograd/derivatives.cpp): the two
// row sums of the input gradient run in the gradient's own kernel, a warp per row, even though a
// bias gradient sums that gradient again; each column sum (the weight's, the bias's, the previous
// Linear's bias) is one kernel of chunks and one that finishes it and writes it reshaped, no
// copies of 768 values; the row statistics are two kernels (the mean; the variance inside 1/std).
// 24 kernels in all before 2026-12-02, 9 now.
BOOST_AUTO_TEST_CASE(layer_norm_backward_computes_its_row_sums_in_the_gradients_kernel) {
  Builder b(kCuda);
  const int64_t T = 8192, C = 768;
  int x = b.input({8, 1024, C}), w = b.input({C}), g = b.input({8, 1024, C}), residual = b.input({8, 1024, C});
  std::vector<int64_t> last{-1};
  auto mean = [&](int v) { return b.op("mean", {v}, {{"dims", last}, {"keepdim", true}}); };
  auto column_sum = [&](int v) {
    int s = b.op("sum", {v}, {{"dims", std::vector<int64_t>{0, 1}}, {"keepdim", true}});
    return b.op("mul", {b.op("view", {s}, {{"shape", Shape{C}}}), b.scalar(0.5)});  // read on, as by an optimizer
  };
  int centered = b.op("sub", {x, mean(x)});
  int rstd = b.op("rsqrt", {b.op("add", {mean(b.op("square", {centered})), b.scalar(1e-5)})});
  int xhat = b.op("mul", {centered, rstd});
  int gw = b.op("mul", {g, w});
  int inner = b.op("sub", {b.op("sub", {gw, mean(gw)}), b.op("mul", {xhat, mean(b.op("mul", {gw, xhat}))})});
  int gx = b.op("add", {b.op("mul", {rstd, inner}), residual});
  b.g.outputs = {gx, column_sum(b.op("mul", {g, xhat})), column_sum(g), column_sum(gx)};
  auto [launches, stmt] = launches_of(b.g);
  BOOST_TEST(launches.size() == 9u);
  int row_kernels = 0;
  for (const GpuLaunch& k : launches) {
    row_kernels += k.blocks == T && k.threads == 32;  // a warp per row, one row a block
    BOOST_TEST(k.blocks * k.threads >= int64_t(C), k.loop << ": " << k.blocks << " x " << k.threads);
  }
  BOOST_TEST(row_kernels == 3);  // the mean, 1/std, and the gradient with its two row sums
  BOOST_TEST(narrow_gpu_launches(launches).empty());
}

// A layer norm's backward that recomputes its row statistics (the bench's layernorm_bwd_rows, and
// torch.compile's twin) reads the mean and 1/std at every element of its rows; they are computed
// in the gradient's rows (hosted_rows in gpu_schedule.cpp): one kernel, a block per row of 4096, a
// warp per row of 768. Stored at the root, each was a kernel that read the rows again (3 kernels;
// 2160 GB/s counting 3 passes on one H200, 0.53 of the copy). With a column sum of x-hat beside
// it (a weight gradient), the statistics are read by two kernels and stay stored.
BOOST_AUTO_TEST_CASE(row_statistics_read_by_one_row_op_are_computed_in_its_rows) {
  for (int64_t C : {int64_t(4096), int64_t(768)}) {
    for (bool weight_gradient : {false, true}) {
      Builder b(kCuda);
      const int64_t T = 8192;
      int x = b.input({T, C}), w = b.input({C}), g = b.input({T, C});
      std::vector<int64_t> last{-1};
      auto mean = [&](int v) { return b.op("mean", {v}, {{"dims", last}, {"keepdim", true}}); };
      int centered = b.op("sub", {x, mean(x)});
      int rstd = b.op("rsqrt", {b.op("add", {mean(b.op("mul", {centered, centered})), b.scalar(1e-5)})});
      int xhat = b.op("mul", {centered, rstd});
      int gw = b.op("mul", {g, w});
      int inner = b.op("sub", {b.op("sub", {gw, mean(gw)}), b.op("mul", {xhat, mean(b.op("mul", {gw, xhat}))})});
      b.g.outputs = {b.op("mul", {rstd, inner})};
      if (weight_gradient)
        b.g.outputs.push_back(b.op("sum", {b.op("mul", {g, xhat})}, {{"dims", std::vector<int64_t>{0}}, {"keepdim", false}}));
      auto [launches, stmt] = launches_of(b.g);
      BOOST_TEST_CONTEXT("C = " << C << (weight_gradient ? ", with a weight gradient" : "")) {
        int row_kernels = 0;
        for (const GpuLaunch& k : launches) row_kernels += k.blocks == T;
        BOOST_TEST(row_kernels == (weight_gradient ? 3 : 1));
        BOOST_TEST(narrow_gpu_launches(launches).empty());
      }
    }
  }
}

// A block per row of 4096 (256 threads, 16 elements a thread): every pass over the row (the
// reductions' partial sums, the output) is unrolled along the same 16 addresses, so LLVM keeps
// the first pass's loads in registers for the later ones and the row is read from memory once:
// the kernel's only global loads are 16 a thread of x (and of a layer_norm's weight and bias).
// Before, the output's loop loaded x again, and softmax read [8192, 4096] twice.
BOOST_AUTO_TEST_CASE(block_rows_read_their_row_once) {
  const int64_t T = 8192, C = 4096, steps = C / 256;
  for (bool norm : {false, true}) {
    Builder b(kCuda);
    int x = b.input({T, C});
    if (norm) {
      int w = b.input({C}), bias = b.input({C});
      b.g.outputs = {b.op("layer_norm", {x, w, bias}, {{"normalized_shape", std::vector<int64_t>{C}}, {"eps", 1e-5}})};
    } else {
      b.g.outputs = {b.op("softmax", {x}, {{"dim", int64_t(-1)}})};
    }
    auto [launches, stmt] = launches_of(b.g);
    BOOST_TEST_CONTEXT(std::string(norm ? "layer_norm" : "softmax")) {
      BOOST_TEST_REQUIRE(launches.size() == 1u);
      BOOST_TEST(launches[0].blocks == T);
      BOOST_TEST(count(stmt, "ld.global") == (norm ? 3 : 1) * steps);
    }
  }
}

// Reductions stored through their epilogues, and the cases that must not be: a softmax over
// columns reads its column sums at every element (computed once, not by every thread); two
// reductions added into one value each keep their own schedule (a row sum a warp per row, a
// column sum in chunks), as a stored Func holds one reduction's epilogue.
BOOST_AUTO_TEST_CASE(stored_reductions_keep_their_own_work) {
  {
    Builder b(kCuda);
    int x = b.input({4096, 1024});
    b.g.outputs = {b.op("softmax", {x}, {{"dim", int64_t(0)}})};
    auto [launches, stmt] = launches_of(b.g);
    for (const GpuLaunch& k : launches)
      BOOST_TEST(k.blocks * k.threads * k.per_thread <= 8 * 4096 * 1024, k.loop << ": " << k.blocks << " x " << k.threads
                                                                             << " x " << k.per_thread);
  }
  {
    Builder b(kCuda);
    int x = b.input({4096, 512}), y = b.input({512, 4096});
    int rows = b.op("sum", {x}, {{"dims", std::vector<int64_t>{1}}, {"keepdim", false}});
    int columns = b.op("sum", {y}, {{"dims", std::vector<int64_t>{0}}, {"keepdim", false}});
    b.g.outputs = {b.op("add", {rows, columns})};
    auto [launches, stmt] = launches_of(b.g);
    BOOST_TEST(narrow_gpu_launches(launches).empty());
    BOOST_TEST(count(stmt, "shfl.sync") >= 1);  // the row sum's warps
  }
}

// GPT-2's residual sum before each layer norm is returned (the next residual reads it) and read by
// the layer norm: the sum and the norm are one Tuple-valued output (tuple_outputs.h), so one
// kernel, a warp per row, stores both. Before, a pointwise kernel stored the sum and the layer
// norm's kernel read it back (17 + 22 us a layer on one H200; now 28.9 us). Its rows are not held
// in registers (36.9 us when they were): the mean, the variance and the output read them again,
// from the caches.
BOOST_AUTO_TEST_CASE(a_residual_sum_and_its_layer_norm_are_one_kernel) {
  Builder b(kCuda);
  int x = b.input({8, 1024, 768}), y = b.input({8, 1024, 768}), bias = b.input({768});
  int w = b.input({768}), beta = b.input({768});
  int h = b.op("add", {x, b.op("add", {y, bias})});
  int ln = b.op("layer_norm", {h, w, beta}, {{"normalized_shape", std::vector<int64_t>{768}}, {"eps", 1e-5}});
  b.g.outputs = {h, ln};
  auto [launches, stmt] = launches_of(b.g);
  BOOST_TEST(launches.size() == 1u);
  for (const GpuLaunch& k : launches) BOOST_TEST(k.threads == 32, k.loop << ": " << k.threads << " threads a block");
  // Each lane stores its 24 elements of the row twice: the sum and the norm.
  int stores = count(stmt, "st.global.f32") + 2 * count(stmt, "st.global.u64") + 4 * count(stmt, "st.global.v4.f32");
  BOOST_TEST(stores == 48, stores << " floats stored a lane");
  BOOST_TEST(count(stmt, "ld.local") + count(stmt, "st.local") == 0);
}

// Under bf16 autocast the layer norm's output is cast to bf16 for the next product: the residual
// sum and the cast norm are still one kernel (they were two on the H200: 15.6 us for the sum, 17.9
// for the norm reading it back).
BOOST_AUTO_TEST_CASE(a_residual_sum_and_its_bf16_layer_norm_are_one_kernel) {
  Builder b(kCuda);
  int x = b.input({8, 1024, 768}), y = b.input({8, 1024, 768}, DType::bf16);
  int w = b.input({768}), beta = b.input({768});
  int h = b.op("add", {x, y});
  int ln = b.op("layer_norm", {h, w, beta}, {{"normalized_shape", std::vector<int64_t>{768}}, {"eps", 1e-5}});
  b.g.outputs = {h, b.op("cast", {ln}, {{"dtype", std::string("bf16")}})};
  auto [launches, stmt] = launches_of(b.g);
  BOOST_TEST(launches.size() == 1u);
  for (const GpuLaunch& k : launches) BOOST_TEST(k.threads == 32, k.loop << ": " << k.threads << " threads a block");
  BOOST_TEST(count(stmt, "ld.local") + count(stmt, "st.local") == 0);
}

// AdamW's update of one parameter writes three tensors of its shape (the new moments and the
// parameter, which reads both). Each output Func was a kernel of its own, and the parameter's
// recomputed the moments from their inputs: 11 tensor passes where 7 (4 read, 3 written) do, 2898
// GB/s on one H200 against torch.compile's 4208 for [50304, 768]. As one Tuple they are one kernel
// that loads each input once.
BOOST_AUTO_TEST_CASE(an_optimizer_update_is_one_kernel_that_reads_each_input_once) {
  Builder b(kCuda);
  int p = b.input({50304, 768}), grad = b.input({50304, 768}), m = b.input({50304, 768}), v = b.input({50304, 768});
  int m2 = b.op("add", {b.op("mul", {m, b.scalar(0.9)}), b.op("mul", {grad, b.scalar(0.1)})});
  int v2 = b.op("add", {b.op("mul", {v, b.scalar(0.999)}), b.op("mul", {b.op("mul", {grad, grad}), b.scalar(0.001)})});
  int denom = b.op("add", {b.op("sqrt", {b.op("div", {v2, b.scalar(0.5)})}), b.scalar(1e-8)});
  int step = b.op("mul", {b.op("div", {b.op("div", {m2, b.scalar(0.3)}), denom}), b.scalar(1e-3)});
  int p2 = b.op("sub", {b.op("mul", {p, b.scalar(0.99)}), step});
  b.g.outputs = {m2, v2, p2};
  auto [launches, stmt] = launches_of(b.g);
  BOOST_TEST(launches.size() == 1u);
  // A thread's 4 elements of each input loaded once, and of each output stored once.
  int loads = count(stmt, "ld.global.nc.f32") + count(stmt, "ld.global.f32") + 4 * count(stmt, "ld.global.nc.v4.f32") +
              4 * count(stmt, "ld.global.v4.f32");
  int stores = count(stmt, "st.global.f32") + 2 * count(stmt, "st.global.u64") + 4 * count(stmt, "st.global.v4.f32");
  BOOST_TEST(loads == 16);
  BOOST_TEST(stores == 12);
}

// GPT-2's heads merged back ([8, 12, 1024, 64] -> [8, 1024, 12, 64]): the copy's fused loop
// walks the output, whose extents and strides the pipeline knows (set_dense_shape), so a thread
// finds its element with constant multiplies and shifts. With the extents read from the buffer
// at run time it divided by them five times a thread and guarded every load and store (18 us a
// layer on one H200 against 14 us now, torch.compile's 12).
BOOST_AUTO_TEST_CASE(a_head_copy_divides_by_no_runtime_extent) {
  Builder b(kCuda);
  int x = b.input({8, 12, 1024, 64});
  b.g.outputs = {b.op("contiguous", {b.op("transpose", {x}, {{"dim0", int64_t(1)}, {"dim1", int64_t(2)}})})};
  auto [launches, stmt] = launches_of(b.g);
  std::string ptx = kernel_ptx(stmt, "contiguous");
  BOOST_TEST(count(ptx, "div.s32") + count(ptx, "rem.s32") + count(ptx, "div.u32") + count(ptx, "rem.u32") == 0, ptx);
  BOOST_TEST(count(ptx, "ld.global") == 4);  // its 4 floats, each loaded once, unguarded
  BOOST_TEST(launches.size() == 1u);
}

// GPT-2's gradients of q, k and v merged into the qkv projection's [8, 1024, 2304] in bf16: a cat
// of three head merges. Each thread runs the three chunks of its point, unrolled (cat_chunks), so
// every load feeds a store; as one point a thread, each loaded all three pieces and kept one.
BOOST_AUTO_TEST_CASE(a_cat_in_whole_chunks_loads_each_piece_once) {
  Builder b(kCuda);
  std::vector<int> merged;
  for (int k = 0; k < 3; ++k) {
    int heads = b.input({8, 12, 1024, 64}, DType::bf16);
    int t = b.op("transpose", {heads}, {{"dim0", int64_t(1)}, {"dim1", int64_t(2)}});
    merged.push_back(b.op("view", {b.op("contiguous", {t})}, {{"shape", std::vector<int64_t>{8, 1024, 768}}}));
  }
  b.g.outputs = {b.op("cat", merged, {{"dim", int64_t(2)}})};
  auto [launches, stmt] = launches_of(b.g);
  BOOST_TEST(launches.size() == 1u);
  std::string ptx = kernel_ptx(stmt, "cat");
  // 4 elements of each chunk a thread (Halide cannot prove the head merge's addresses aligned,
  // so they move as scalars).
  int loads = count(ptx, "ld.global"), stores = count(ptx, "st.global");
  BOOST_TEST(stores == 3 * 4, ptx);
  BOOST_TEST(loads == stores, loads << " loads, " << stores << " stores:\n" << ptx);
}

// A transposed copy, [8192, 3072] -> [3072, 8192] (gpu_transpose.h): each block stages a 32 x 32
// tile of the input in shared memory, read along the input's rows and written along the output's.
// As a plain pointwise Func each warp's loads were 32 rows apart (908 GB/s on one H200).
BOOST_AUTO_TEST_CASE(a_transposed_copy_goes_through_a_tile_in_shared_memory) {
  for (Shape shape : {Shape{8192, 3072}, Shape{100, 70}}) {  // tiles that divide, and tails
    Builder b(kCuda);
    int x = b.input(shape);
    b.g.outputs = {b.op("contiguous", {b.op("transpose", {x}, {{"dim0", int64_t(0)}, {"dim1", int64_t(1)}})})};
    auto [launches, stmt] = launches_of(b.g);
    BOOST_TEST_REQUIRE(launches.size() == 1u);
    BOOST_TEST(launches[0].threads == 256);
    BOOST_TEST(launches[0].blocks == ((shape[0] + 31) / 32) * ((shape[1] + 31) / 32));
    std::string ptx = kernel_ptx(stmt, "contiguous");
    bool tails = shape[0] % 32 != 0;  // then Halide writes the loops again for the edge tiles
    int in = count(ptx, "st.shared.f32"), out = count(ptx, "ld.shared.f32");
    BOOST_TEST((tails ? in >= 4 : in == 4), in << " stores into the tile");  // a thread's 4 elements
    BOOST_TEST((tails ? out >= 4 : out == 4), out << " loads from the tile");
    BOOST_TEST(count(ptx, "bar.sync") >= 1);
  }
  // Read twice, once across: no tile (it would span both reads).
  Builder b(kCuda);
  int x = b.input({256, 256});
  b.g.outputs = {b.op("add", {x, b.op("transpose", {x}, {{"dim0", int64_t(0)}, {"dim1", int64_t(1)}})})};
  auto [launches, stmt] = launches_of(b.g);
  BOOST_TEST(count(stmt, "st.shared") == 0);
}

// GPT-2's logits are [8192, 50304]: a softmax over rows that long, split by split_long_reductions into
// 8 chunks of 6288 (graph/passes.h), is three kernels: the chunks' log-sum-exps (a block a chunk),
// the rows' (rows of 8, 8 lanes a row and 16 rows a block), and the output, 4 elements a thread
// that also reads its row's log-sum-exp.
BOOST_AUTO_TEST_CASE(a_long_row_softmax_runs_as_chunks_then_rows) {
  const int64_t rows = 64, C = 50304, K = 8;
  Builder b(kCuda);
  int x = b.input({rows, C});
  b.g.outputs = {b.op("softmax", {x}, {{"dim", int64_t(-1)}})};
  BOOST_TEST_REQUIRE(split_long_reductions(b.g) == 1);
  auto [launches, stmt] = launches_of(b.g);
  BOOST_TEST_REQUIRE(launches.size() == 3u);
  BOOST_TEST(launches[0].blocks == rows * K);
  BOOST_TEST(launches[0].threads >= 128);
  BOOST_TEST(launches[1].blocks == rows / 16);
  BOOST_TEST(launches[1].threads == 8 * 16);
  BOOST_TEST(launches[2].blocks * launches[2].threads * 4 == rows * C);
  auto loads = [](const std::string& ptx) { return count(ptx, "ld.global.nc.f32") + count(ptx, "ld.global.f32"); };
  BOOST_TEST(loads(kernel_ptx(stmt, "_kernel_exp")) == 5);  // a thread's 4 logits and its row's log-sum-exp
}

// GPT's input: token and position embeddings (the positions an arange), their sum and the first
// layer_norm are one region and one CUDA kernel (the gathers clamp their indices, as CUDA's eager
// kernel does): three kernels and two [B, T, C] round trips fewer than the gathers as eager steps.
// With KILN_CHECK_INDICES=1 the gathers run eagerly again, their indices checked on the host.
BOOST_AUTO_TEST_CASE(token_and_position_embeddings_fuse_into_the_first_layer_norm) {
  auto build = [] {
    Builder b(kCuda);
    int tokens = b.input({8, 1024}, DType::i64), wte = b.input({50304, 768}), wpe = b.input({1024, 768});
    int gamma = b.input({768}), beta = b.input({768});
    Attrs range{{"start", 0.0}, {"end", 1024.0}, {"step", 1.0}, {"dtype", std::string("i64")}, {"device", std::string("cuda:0")}};
    int x = b.op("add", {b.op("embedding", {wte, tokens}), b.op("embedding", {wpe, b.op("arange", {}, range)})});
    b.g.outputs = {b.op("layer_norm", {x, gamma, beta}, {{"normalized_shape", std::vector<int64_t>{768}}, {"eps", 1e-5}})};
    return b;
  };
  Builder b = build();
  auto [launches, stmt] = launches_of(b.g);
  BOOST_TEST(launches.size() == 1u);
  Builder checked = build();
  test::ScopedEnv check("KILN_CHECK_INDICES", "1");
  int eager = 0;
  for (const PlannedStep& s : plan_fusion(checked.g)) eager += s.node >= 0;
  BOOST_TEST(eager == 2);
}

// GPT-2's loss, split by split_long_reductions: every region of the rows' log-sum-exps, the
// gathered targets' indices and the mean compiles for CUDA, none on the host; the gather (an
// embedding) runs between them.
BOOST_AUTO_TEST_CASE(a_split_cross_entropy_compiles_for_cuda) {
  Builder b(kCuda);
  b.g.outputs = b.g.add_inferred_node(op_def("cross_entropy"), {}, {b.input({64, 50304}), b.input({64}, DType::i64)});
  BOOST_TEST_REQUIRE(split_long_reductions(b.g) == 1);
  check_on_device(b.g, "cross_entropy of [64, 50304], split");
}

// A sum of 2^26 elements, split by split_long_reductions into 8192 chunks of 8192, is two row
// reductions: a block a chunk, then one block over the chunks' sums. Unsplit, it was five kernels
// ending in one thread's serial sum of 256 partials (full_sum on one H200: 2444 GB/s).
BOOST_AUTO_TEST_CASE(a_large_full_sum_runs_as_chunks_then_one_block) {
  const int64_t n = int64_t(1) << 26, K = 8192;
  Builder b(kCuda);
  b.g.outputs = {b.op("sum", {b.input({n})}, {{"dims", std::vector<int64_t>{}}, {"keepdim", false}})};
  BOOST_TEST_REQUIRE(split_long_reductions(b.g) == 1);
  auto [launches, stmt] = launches_of(b.g);
  BOOST_TEST_REQUIRE(launches.size() == 2u);
  BOOST_TEST(launches[0].blocks == K);
  BOOST_TEST(launches[0].threads >= 128);
  BOOST_TEST(launches[1].blocks == 1);
  BOOST_TEST(launches[1].threads >= 128);
}

// A softmax over rows of 64 runs 8 lanes a row, 4 rows to a warp and 16 to a block: each lane
// loads 8 of its row's elements (two steps of 4) once, and each of the two reductions (max, sum)
// combines 8 lanes' values through 8 shuffles (a warp a row took 32 per reduction for 2 elements
// a lane: 1354 GB/s on [1M, 64] on one H200 against 3983).
BOOST_AUTO_TEST_CASE(rows_of_64_share_a_warp_eight_lanes_a_row) {
  Builder b(kCuda);
  b.g.outputs = {b.op("softmax", {b.input({4096, 64})}, {{"dim", int64_t(-1)}})};
  auto [launches, stmt] = launches_of(b.g);
  BOOST_TEST_REQUIRE(launches.size() == 1u);
  BOOST_TEST(launches[0].threads == 8 * 16);
  BOOST_TEST(launches[0].blocks == 4096 / 16);
  std::string ptx = kernel_ptx(stmt, "softmax");
  BOOST_TEST(count(ptx, "shfl.sync") == 2 * 8);
  BOOST_TEST(count(ptx, "ld.global.nc.f32") + count(ptx, "ld.global.f32") == 8);  // for the max, the sum and the output
}

// A block's rows share its reductions, computed for all of them: the rows per block divide the
// row count, or the last block would read rows past the end. Softmax of [1000, 64] with 16 rows a
// block asked its input for 1008 rows (Halide's bounds error at run time). The rows of a block
// also fill whole warps, as Halide's shuffles name all 32 lanes (PTX leaves that undefined for
// threads that do not exist). 1000 rows take 8 a block of 8 lanes each (10 would leave a warp half
// empty), 1001 (7 x 11 x 13), 6 and a prime count a warp per row, one row a block.
BOOST_AUTO_TEST_CASE(short_rows_per_block_divide_the_rows_and_fill_whole_warps) {
  for (auto [rows, length, per_block, width] :
       {std::tuple<int64_t, int64_t, int64_t, int64_t>{1000, 64, 8, 8}, {1001, 64, 1, 32}, {997, 64, 1, 32}, {6, 34, 1, 32},
        {1024, 64, 16, 8}}) {
    Builder b(kCuda);
    b.g.outputs = {b.op("softmax", {b.input({rows, length})}, {{"dim", int64_t(-1)}})};
    auto [launches, stmt] = launches_of(b.g);
    BOOST_TEST_CONTEXT(rows << " rows of " << length) {
      BOOST_TEST_REQUIRE(launches.size() == 1u);
      BOOST_TEST(launches[0].blocks == rows / per_block);
      BOOST_TEST(launches[0].threads == per_block * width);
      BOOST_TEST(launches[0].threads % 32 == 0);
      // The input's required rows end at the last row.
      BOOST_TEST(count(stmt, "(\"Input buffer in_0\", 1, 0, " + std::to_string(rows - 1) + ",") == 1);
    }
  }
}

// A row shorter than the lanes a warp row would give it, or whose last step falls to one lane,
// runs a thread per row: Halide 14 issues the shuffles of that step in lane 0 alone, and they wait
// for lanes that never arrive (CUDA fuzz seed 1001: a mean over [1, 1] rows, and softmax of
// [6, 33], never finished on an H100). Rows that fill their lanes, or end in a step of several
// lanes ([997, 48] passed there), keep the warp.
BOOST_AUTO_TEST_CASE(rows_shorter_than_their_lanes_or_ending_in_one_lane_run_without_warp_shuffles) {
  for (auto [shape, warp] : {std::pair<Shape, bool>{{1, 1}, false}, {{1, 20}, false}, {{1000, 4}, false},
                             {{6, 33}, false}, {{1000, 9}, false}, {{1, 32}, true}, {{1000, 64}, true},
                             {{997, 48}, true}, {{1000, 10}, true}}) {
    Builder b(kCuda);
    b.g.outputs = {b.op("mean", {b.input(shape)}, {{"dims", std::vector<int64_t>{-1}}, {"keepdim", true}})};
    auto [launches, stmt] = launches_of(b.g);
    BOOST_TEST_CONTEXT(to_string(shape)) {
      BOOST_TEST((count(stmt, "shfl.sync") > 0) == warp);
      BOOST_TEST_REQUIRE(launches.size() == 1u);
      if (!warp) BOOST_TEST(launches[0].per_thread >= shape[1]);  // the row's elements in one thread
    }
  }
}

// A pointwise exp of f32 vectorized 4 wide: each lane's exp is PTX's ex2.approx (gpu_math.h's fast exp
// calls libdevice's exp2f, which Halide calls once per lane and which flushes denormals to 0).
BOOST_AUTO_TEST_CASE(a_vectorized_exp_compiles_for_cuda) {
  Builder b(kCuda);
  int x = b.input({256, 1024});
  b.g.outputs = {b.op("exp", {b.op("mul", {x, b.scalar(0.5)})})};
  auto [launches, stmt] = launches_of(b.g);
  BOOST_TEST(count(stmt, "ex2.approx.ftz.f32") == 4);
}

// The CUDA suite's compiled fuzz programs (tests/cuda/test_compile.cpp, seeds from 1000), traced
// on the CPU and lowered for CUDA here (schedules and PTX), where no device is needed. Seed 1022
// once failed in Halide 14's codegen ("Symbol not found: ....buffer": a transposed tile computed
// outside one of its output's block loops). KILN_FUZZ_FIRST_SEED moves the range (30 seeds from
// it).
BOOST_AUTO_TEST_CASE(fuzz_programs_compile_for_cuda) {
  test::FuzzConfig c;
  c.low_precision = true;
  const char* first_env = std::getenv("KILN_FUZZ_FIRST_SEED");
  const int first = first_env ? std::atoi(first_env) : 1000;
  for (int seed = first; seed < first + 30; ++seed) {
    test::FuzzProgram p = test::generate_program(uint64_t(seed), c);
    if (std::getenv("KILN_DEBUG_GPU_TEST")) std::cerr << "seed " << seed << "\n" << test::program_to_cpp(p) << std::endl;
    keep_graphs().graphs.clear();
    auto f = compile([&p](std::vector<Tensor> v) { return test::run_program(p, v); }, {.backend = "keep_graphs"});
    f(test::make_inputs(p, uint64_t(seed) + 1));
    for (Graph& g : keep_graphs().graphs) {
      Graph cuda = on_cuda(g);
      check_on_device(cuda, "fuzz seed " + std::to_string(seed), Regions::optional);
    }
  }
}


// A region's own schedule (schedules/region_schedule.h): a file named after the region's key in
// KILN_SCHEDULE_DIR sets its tunables for it alone. A layer_norm over rows of 8192 runs a block
// a row at 256 threads by default; its file asks for 512, and the kernels launch 512, while a
// softmax region without a file keeps 256.
BOOST_AUTO_TEST_CASE(a_regions_schedule_file_sets_its_own_row_threads) {
  auto layer_norm_rows = [] {
    Builder b(kCuda);
    int x = b.input({64, 8192}), w = b.input({8192}), bias = b.input({8192});
    b.g.outputs = {b.op("layer_norm", {x, w, bias}, {{"normalized_shape", std::vector<int64_t>{8192}}, {"eps", 1e-5}})};
    return b;
  };
  auto max_threads = [](const std::vector<GpuLaunch>& launches) {
    int most = 0;
    for (const GpuLaunch& l : launches) most = std::max(most, int(l.threads));
    return most;
  };
  Builder plain = layer_norm_rows();
  BOOST_TEST(max_threads(launches_of(plain.g).first) == 256);

  Builder tuned = layer_norm_rows();
  std::vector<PlannedStep> plan = plan_fusion(tuned.g);
  BOOST_TEST_REQUIRE(plan.size() == 1u);
  std::string key = region_schedule_key(region_signature(tuned.g, plan[0].region));
  BOOST_TEST(key.size() == 16u);
  auto dir = std::filesystem::temp_directory_path() / ("kiln-region-schedules-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  {
    std::ofstream f(dir / (key + ".schedule"));
    f << "# layer_norm rows of 8192\ngpu.row.threads 512   # twice the default\n";
  }
  test::ScopedEnv schedules("KILN_SCHEDULE_DIR", dir.c_str());
  BOOST_TEST(max_threads(launches_of(tuned.g).first) == 512);
  Builder other;
  other.g.outputs = {other.op("softmax", {other.input({64, 8192})}, {{"dim", int64_t(-1)}})};
  BOOST_TEST(max_threads(launches_of(other.g).first) == 256);
  std::filesystem::remove_all(dir);
}

// A schedule's text: directives in order, comments and blank lines skipped; an unknown
// directive, a value out of range and a value that is not a whole number are errors naming the
// file, the line and the directive.
BOOST_AUTO_TEST_CASE(region_schedule_text_is_checked_line_by_line) {
  RegionSchedule s = parse_region_schedule("# comment\n\ngpu.row.threads 128\ngpu.row.registers 0\n", "a.schedule");
  BOOST_TEST(s.directives.size() == 2u);
  RowTuning t = apply_region_schedule(s, RowTuning{});
  BOOST_TEST(t.threads == 128);
  BOOST_TEST(!t.registers);
  auto error_of = [](const std::string& text) {
    try {
      parse_region_schedule(text, "r.schedule");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  std::string unknown = error_of("gpu.row.threads 64\ngpu.row.thread 64\n");
  BOOST_TEST(unknown.find("r.schedule:2") != std::string::npos, unknown);
  BOOST_TEST(unknown.find("unknown directive 'gpu.row.thread'") != std::string::npos, unknown);
  BOOST_TEST(unknown.find("gpu.row.threads 32..1024") != std::string::npos, unknown);  // the known ones listed
  std::string range = error_of("gpu.row.threads 2048\n");
  BOOST_TEST(range.find("r.schedule:1") != std::string::npos, range);
  BOOST_TEST(range.find("must lie in [32, 1024], got 2048") != std::string::npos, range);
  std::string word = error_of("gpu.row.unroll four\n");
  BOOST_TEST(word.find("takes a whole number, got 'four'") != std::string::npos, word);
  std::string two = error_of("gpu.row.unroll 4 8\n");
  BOOST_TEST(two.find("takes one whole number") != std::string::npos, two);
}

// A user's Halide ops over whole tensors (graph/halide_op.h) and their propagate_adjoints
// gradients, under the custom schedule: every stage on the device (the gradients' scatters as
// atomic adds), every load and store inside its buffer.
BOOST_AUTO_TEST_CASE(halide_ops_over_tensors_and_their_gradients_run_on_the_device) {
  // A backward through them (on the CPU) registers their gradient ops.
  Tensor x = test::random_tensor({4, 6}, DType::f32, 1).requires_grad_(), w = test::random_tensor({6}, DType::f32, 2).requires_grad_();
  call_op(test::weighted_sumsq(), {call_op(test::blur_rows(), {x})[0], w})[0].sum().backward();
  Builder b(kCuda);
  int xi = b.input({512, 300}), wi = b.input({300}), dy = b.input({512});
  int blurred = b.op("kiln_test::blur_rows", {xi});
  int y = b.op("kiln_test::weighted_sumsq", {blurred, wi});
  int dw = b.op("kiln_test::weighted_sumsq_grad1", {blurred, wi, dy});
  int dblurred = b.op("kiln_test::weighted_sumsq_grad0", {blurred, wi, dy});
  b.g.outputs = {y, dw, b.op("kiln_test::blur_rows_grad0", {xi, dblurred})};
  check_on_device(b.g, "blur_rows, weighted_sumsq and their gradients");
}
