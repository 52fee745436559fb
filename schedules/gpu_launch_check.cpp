#include "schedules/gpu_launch_check.h"

#include <algorithm>
#include <sstream>
#include <utility>

namespace kiln {

using namespace Halide;
using namespace Halide::Internal;

namespace {

constexpr int64_t kLargeWork = int64_t(1) << 20;  // iterations worth spreading over the GPU
constexpr int64_t kMinBlocks = 64;                // about half the SMs of a large GPU
constexpr int64_t kMinThreads = 16384;
constexpr int64_t kMaxLaunchLoop = 256;           // host iterations that each launch a kernel

bool is_gpu_loop(ForType t) { return t == ForType::GPUBlock || t == ForType::GPUThread || t == ForType::GPULane; }

// Walks a lowered body, evaluating loop extents under the lets seen so far and the known sizes.
class LaunchWalker : public IRVisitor {
 public:
  explicit LaunchWalker(const std::map<std::string, int64_t>& sizes) {
    for (const auto& [name, v] : sizes) scope_[name] = make_const(Int(32), v);
  }
  std::vector<GpuLaunch> launches;

 private:
  using IRVisitor::visit;

  std::map<std::string, Expr> scope_;
  GpuLaunch* kernel_ = nullptr;
  int64_t host_iterations_ = 1, threads_ = 1, serial_ = 1;
  bool host_known_ = true;

  int64_t extent_of(const Expr& e, bool& known) {
    Expr v = simplify(substitute(scope_, e));
    if (const int64_t* c = as_const_int(v)) return *c;
    known = false;
    return 1;
  }

  void visit(const LetStmt* op) override {
    bool had = scope_.count(op->name) > 0;
    if (!had) scope_[op->name] = simplify(substitute(scope_, op->value));  // known sizes win over the lets
    op->body.accept(this);
    if (!had) scope_.erase(op->name);
  }

  void visit(const For* op) override {
    bool known = true;
    int64_t n = extent_of(op->extent, known);
    if (!kernel_ && !is_gpu_loop(op->for_type)) {  // a loop on the host
      int64_t saved = host_iterations_;
      bool saved_known = host_known_;
      host_iterations_ *= n;
      host_known_ = host_known_ && known;
      op->body.accept(this);
      host_iterations_ = saved;
      host_known_ = saved_known;
      return;
    }
    bool opens = !kernel_;
    if (opens) {
      launches.push_back({});
      kernel_ = &launches.back();
      kernel_->loop = op->name;
      kernel_->launches = host_iterations_;
      kernel_->known = host_known_;
      threads_ = serial_ = 1;
    }
    kernel_->known = kernel_->known && known;
    int64_t saved_threads = threads_, saved_serial = serial_;
    if (op->for_type == ForType::GPUBlock) kernel_->blocks *= n;
    else if (op->for_type == ForType::GPUThread || op->for_type == ForType::GPULane) threads_ *= n;
    else if (op->for_type != ForType::Vectorized) serial_ *= n;
    kernel_->threads = std::max(kernel_->threads, threads_);
    kernel_->per_thread = std::max(kernel_->per_thread, serial_);
    op->body.accept(this);
    threads_ = saved_threads;
    serial_ = saved_serial;
    if (opens) kernel_ = nullptr;
  }
};

// A lowering pass that changes nothing: it shows the lowered statement to its function.
class Inspector : public IRMutator {
 public:
  explicit Inspector(std::function<void(const Stmt&)> look) : look_(std::move(look)) {}
  using IRMutator::mutate;
  Stmt mutate(const Stmt& s) override {
    look_(s);
    return s;
  }

 private:
  std::function<void(const Stmt&)> look_;
};

std::string describe(const GpuLaunch& k) {
  std::ostringstream s;
  s << k.loop << ": " << k.blocks << " blocks x " << k.threads << " threads, " << k.per_thread
    << " serial iterations per thread";
  if (k.launches > 1) s << ", launched " << k.launches << " times from a host loop";
  return s.str();
}

}  // namespace

void inspect_lowered(Pipeline& p, std::function<void(const Stmt&)> look) {
  p.add_custom_lowering_pass(new Inspector(std::move(look)));
}

std::shared_ptr<const std::vector<GpuLaunch>> record_gpu_launches(Pipeline& p,
                                                                  const std::map<std::string, int64_t>& sizes) {
  auto out = std::make_shared<std::vector<GpuLaunch>>();
  inspect_lowered(p, [sizes, out](const Stmt& s) {
    LaunchWalker w(sizes);
    s.accept(&w);
    *out = w.launches;
  });
  return out;
}

std::map<std::string, int64_t> region_sizes(const Graph& g, const Region& r, const LoweredRegion& lowered) {
  std::map<std::string, int64_t> sizes;
  auto buffer = [&](const std::string& name, const Shape& shape) {
    int64_t stride = 1;
    for (size_t d = 0; d < shape.size(); ++d) {  // Halide's dim d is the tensor's dim rank-1-d
      int64_t extent = shape[shape.size() - 1 - d];
      std::string at = "." + std::to_string(d);
      sizes[name + ".min" + at] = 0;
      sizes[name + ".extent" + at] = extent;
      sizes[name + ".stride" + at] = stride;
      stride *= extent;
    }
  };
  for (size_t k = 0; k < r.inputs.size(); ++k) buffer(lowered.inputs[k].name(), region_input_shape(g, r, k));
  size_t k = 0;  // the region output of each buffer (a Tuple-valued output has several)
  for (const Halide::Func& f : lowered.outputs)
    for (const Halide::OutputImageParam& b : f.output_buffers()) buffer(b.name(), g.values[size_t(r.outputs[k++])].meta.shape);
  for (const auto& [sym, p] : lowered.symbols) sizes[p.name()] = g.shape_env->symbol(sym).hint;
  return sizes;
}

std::vector<std::string> narrow_gpu_launches(const std::vector<GpuLaunch>& launches) {
  std::vector<std::string> out;
  for (const GpuLaunch& k : launches) {
    if (!k.known) continue;
    bool narrow = k.work() >= kLargeWork && (k.blocks < kMinBlocks || k.blocks * k.threads < kMinThreads);
    bool launch_loop = k.launches > kMaxLaunchLoop;
    if (narrow || launch_loop) out.push_back(describe(k));
  }
  return out;
}

}  // namespace kiln
