// kiln's CUDA schedule at the sizes real users run, without a GPU: the real-size zoo
// (zoo::ZooSize::real: GPT-2 small at batch 8 x 1024, an MLP and a transformer block over 8192
// tokens) is captured on the CPU, forward and whole training step (AdamW inside), by a backend
// that runs nothing; each graph as captured is moved to cuda:0 and sent through the compile path
// (graph passes, joint graph partition) as a CUDA graph, then planned, lowered and scheduled for
// CUDA, and
// every kernel of every region is measured at the traced sizes (schedules/gpu_launch_check.h).
// A kernel that does a large loop on few threads, or a host loop of launches, fails the test with
// its loop, blocks, threads and serial iterations, as does a load or store outside its buffer
// (schedules/gpu_bounds_check.h). Regions alike (GPT-2's twelve layers) are
// compiled once, as the halide backend does (region_signature.h). KILN_PRINT_LAUNCHES=1 prints
// every kernel, KILN_PRINT_REGIONS=1 every region's ops.
#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <iostream>
#include <map>
#include <set>

#include "bench/zoo.h"
#include "graph/backend.h"
#include "graph/compile_graph.h"
#include "schedules/fusion.h"
#include "schedules/gpu_bounds_check.h"
#include "schedules/gpu_launch_check.h"
#include "schedules/gpu_schedule.h"
#include "schedules/lower_region.h"
#include "schedules/region_signature.h"
#include "schedules/shared_library.h"

using namespace kiln;

namespace {

const Device kCuda = Device::cuda(0);

// Outputs of the right shapes, uninitialized: enough for the capture to go on.
class ShapesOnlyGraph final : public CompiledGraph {
 public:
  explicit ShapesOnlyGraph(std::shared_ptr<const Graph> g) : g_(std::move(g)) {}
  TensorList run(const TensorList&) const override {
    TensorList out;
    for (int v : g_->outputs) {
      const TensorMeta& m = g_->values[size_t(v)].meta;
      out.push_back(Tensor::empty(m.shape, {m.dtype, m.device}));
    }
    return out;
  }
  int kernel_count() const override { return 0; }

 private:
  std::shared_ptr<const Graph> g_;
};

// Keeps every graph it is given and computes nothing: as captured (before the graph passes,
// which depend on the device: attention is fused on the CPU only), or as the backend gets them.
class KeepShapes final : public Backend {
 public:
  KeepShapes(const char* name, bool captured) : name_(name), captured_(captured) {}
  std::vector<Graph> graphs;
  std::string_view name() const override { return name_; }
  bool takes_captured_graphs() const override { return captured_; }
  // The compile path then runs the passes it runs for the halide backend (split long reductions,
  // fused attention), so the regions checked are those the GPU runs.
  bool fuses_ops() const override { return !captured_; }
  std::shared_ptr<CompiledGraph> compile(std::shared_ptr<const Graph> g, const BackendOptions&) override {
    graphs.push_back(*g);
    return std::make_shared<ShapesOnlyGraph>(std::move(g));
  }

 private:
  const char* name_;
  bool captured_;
};

KeepShapes& backend_of(const char* name, bool captured) {
  auto k = std::make_shared<KeepShapes>(name, captured);
  register_backend(k);
  return *k;
}

KeepShapes& keep_captured() {
  static KeepShapes& b = backend_of("keep_captured", true);
  return b;
}

KeepShapes& keep_compiled() {
  static KeepShapes& b = backend_of("keep_compiled", false);
  return b;
}

Graph on_cuda(Graph g) {
  move_graph_to(g, kCuda);
  return g;
}

zoo::ZooModel real_model(const std::string& name) {
  if (name != "gpt2_small") return zoo::make_zoo_model(name, zoo::ZooSize::real);
  zoo::ZooModel m = zoo::make_zoo_model(name, zoo::ZooSize::real);
  const nn::GptConfig cfg{.vocab = 50304, .seq = 1024, .width = 768, .heads = 12, .layers = 12, .gelu = "tanh"};
  m.module = std::make_shared<nn::TinyGpt>(cfg);
  m.module->eval();
  m.forward = [module = m.module](const TensorList& in) { return TensorList{module->forward(in.at(0))}; };
  return m;
}

// The region's ops with their values and shapes, and what it reads and writes.
void print_region(const Graph& g, const Region& r, int index) {
  std::cout << "region " << index << "\n";
  for (int n : r.nodes) std::cout << "  " << node_text(g, g.nodes[size_t(n)]) << "\n";
  std::cout << "  reads";
  for (int v : r.inputs) std::cout << " %" << v;
  std::cout << ", writes";
  for (int v : r.outputs) std::cout << " %" << v;
  std::cout << "\n";
}

struct Counts {
  int regions = 0, distinct = 0;  // regions, and distinct pipelines among them (region_signature.h)
};

// Every distinct region of g, scheduled for CUDA: the kernels that run large loops on few threads,
// and the accesses that leave their buffers.
std::vector<std::string> bad_kernels(const Graph& cuda_graph, Counts& counts) {
  Graph g = cuda_graph;
  std::vector<std::string> found;
  std::set<std::string> seen;
  int index = 0;
  for (PlannedStep& step : plan_fusion(g)) {
    if (step.node >= 0) continue;
    ++counts.regions;
    if (!seen.insert(region_signature(g, step.region)).second) continue;  // compiled once, as the backend does
    ++counts.distinct;
    LoweredRegion lowered = lower_region(g, step.region);
    Halide::Pipeline p(lowered.outputs);
    schedule_gpu(g, step.region, lowered);
    std::map<std::string, int64_t> sizes = region_sizes(g, step.region, lowered);
    auto launches = record_gpu_launches(p, sizes);
    auto bounds = record_gpu_bounds(p, sizes);
    p.compile_to_module(pipeline_arguments(step.region, lowered), "kiln_region", aot_target(true));
    std::string ops;
    for (int n : step.region.nodes) ops += " " + g.nodes[size_t(n)].op->name;
    if (std::getenv("KILN_PRINT_REGIONS")) print_region(g, step.region, index);
    if (std::getenv("KILN_PRINT_LAUNCHES"))
      for (const GpuLaunch& k : *launches)
        std::cout << "region " << index << " (" << ops << " ): " << k.loop << " blocks " << k.blocks << " threads "
                  << k.threads << " serial " << k.per_thread << " launches " << k.launches << (k.known ? "" : " (symbolic)")
                  << "\n";
    std::vector<std::string> findings = narrow_gpu_launches(*launches);
    findings.insert(findings.end(), bounds->outside.begin(), bounds->outside.end());
    for (const std::string& w : findings) found.push_back("region " + std::to_string(index) + " (" + ops + " ): " + w);
    ++index;
  }
  return found;
}

// The captured graphs moved to cuda:0 and sent through the compile path as CUDA graphs: what
// the halide backend would plan, lower and schedule on a GPU.
Counts check_graphs(const std::string& what) {
  BOOST_TEST_REQUIRE(!keep_captured().graphs.empty());
  keep_compiled().graphs.clear();
  int n = 0;
  for (const Graph& g : keep_captured().graphs)
    compile_graph(on_cuda(g), keep_compiled(), {}, what + " graph " + std::to_string(n++));
  BOOST_TEST_REQUIRE(!keep_compiled().graphs.empty());
  Counts counts;
  for (const Graph& g : keep_compiled().graphs)
    for (const std::string& w : bad_kernels(g, counts)) BOOST_ERROR(what << ": " << w);
  BOOST_TEST_MESSAGE(what << ": " << counts.regions << " regions, " << counts.distinct << " distinct pipelines");
  return counts;
}

}  // namespace

BOOST_AUTO_TEST_CASE(real_size_forward_spreads_every_gpu_loop) {
  NoGradGuard no_grad;
  for (const std::string& name : zoo::zoo_names(zoo::ZooSize::real)) {
    keep_captured().graphs.clear();
    manual_seed(0);
    zoo::ZooModel m = real_model(name);
    zoo::ZooFunction f = zoo::compile_zoo_model(m, {.backend = "keep_captured"});
    f(m.make_inputs());
    check_graphs(name + " forward");
  }
}

BOOST_AUTO_TEST_CASE(real_size_training_step_spreads_every_gpu_loop) {
  EnableGradGuard grad;
  for (const std::string& name : zoo::zoo_names(zoo::ZooSize::real)) {
    keep_captured().graphs.clear();
    manual_seed(0);
    zoo::ZooModel m = real_model(name);
    optim::AdamW opt(m.module->parameters(), {});
    auto step = compile(
        [&](std::vector<Tensor> xs) {
          Tensor loss = m.loss(m.forward(xs));
          loss.backward();
          opt.step();
          opt.zero_grad();
          return loss;
        },
        {.backend = "keep_captured", .name = name + " train step"});
    step(m.make_inputs());
    Counts counts = check_graphs(name + " train step");
    // GPT-2's twelve alike layers, and the updates of its same-shaped parameters, share pipelines.
    if (name == "gpt2_small") BOOST_TEST(counts.distinct * 4 < counts.regions);
  }
}

// GPT-2 small's training step under bf16 autocast (forward and loss; backward and AdamW outside):
// the bf16 regions at real size, through the same checks.
BOOST_AUTO_TEST_CASE(real_size_bf16_training_step_of_gpt2_spreads_every_gpu_loop) {
  EnableGradGuard grad;
  keep_captured().graphs.clear();
  manual_seed(0);
  zoo::ZooModel m = real_model("gpt2_small");
  optim::AdamW opt(m.module->parameters(), {});
  auto step = compile(
      [&](std::vector<Tensor> xs) {
        Tensor loss;
        {
          AutocastGuard autocast(Device::cpu(), DType::bf16);  // traced on the CPU, moved to CUDA
          loss = m.loss(m.forward(xs));
        }
        loss.backward();
        opt.step();
        opt.zero_grad();
        return loss;
      },
      {.backend = "keep_captured", .name = "gpt2_small bf16 train step"});
  step(m.make_inputs());
  int products = 0, bf16_products = 0;
  for (const Graph& g : keep_captured().graphs)
    for (const GraphNode& n : g.nodes)
      if (n.op->name == "matmul") {
        ++products;
        bf16_products += g.values[size_t(n.outputs[0])].meta.dtype == DType::bf16;
      }
  BOOST_TEST(products > 0);
  BOOST_TEST(bf16_products == products, bf16_products << " of " << products << " products in bf16");
  Counts counts = check_graphs("gpt2_small bf16 train step");
  BOOST_TEST(counts.distinct * 4 < counts.regions);
  // GPT-2's tanh GELU runs in cuBLASLt's epilogues: the fc product writes GELU's output and input,
  // the product of the gradient applies GELU's derivative; no GELU kernel is left.
  std::map<std::string, int> ops;
  for (const Graph& g : keep_compiled().graphs)
    for (const GraphNode& n : g.nodes) {
      ++ops[n.op->name];
      if (n.op->name == "matmul_bias_gelu") BOOST_TEST(n.outputs.size() == 2u);
    }
  BOOST_TEST(ops["matmul_bias_gelu"] == 12);
  BOOST_TEST(ops["matmul_gelu_backward"] == 12);
  BOOST_TEST(ops["gelu"] == 0);
  BOOST_TEST(ops["gelu_backward"] == 0);
  // The bias gradients of a layer's four Linears are summed in their weight gradients' GEMMs.
  BOOST_TEST(ops["matmul_bias_grad"] == 48);
}
