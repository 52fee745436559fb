#include "dsl/distributed/ddp.h"

#include <algorithm>
#include <atomic>
#include <sstream>

#include "dsl/creation.h"
#include "dsl/distributed/functional.h"
#include "dsl/error.h"
#include "dsl/fnv_hash.h"
#include "dsl/functions.h"
#include "dsl/traced_grad_hooks.h"

namespace kiln::distributed {

namespace {

// What parameter p contributes to its bucket: its gradient flat, in p's dtype; zeros where the
// backward gave it none (every rank reduces the same buckets). Eager hooks and the traced
// backward both.
Tensor flat_gradient(const Tensor& p, const Tensor& grad) {
  if (!grad.defined()) return zeros({p.numel()}, p.options());
  return (grad.dtype() == p.dtype() ? grad : grad.to(p.dtype())).reshape({p.numel()});
}

}  // namespace

// The gradient buckets and the state of one backward pass. Hooks run on the backward's thread;
// the all-reduces on the group's communication thread, each on its bucket's own buffer.
struct DistributedDataParallel::Reducer {
  struct Bucket {
    std::vector<int> params;  // indices into `params`
    int64_t numel = 0;        // elements of its parameters, together
    Tensor flat;              // the bucket's gradients, one after another
    int ready = 0;            // parameters whose gradient is in `flat` this pass
    Work work;
  };

  const int64_t id;  // counts its compiled all-reduces (all_reduces_started)
  ProcessGroup& group;
  std::vector<Tensor> params;
  std::vector<Bucket> buckets;
  std::vector<int> bucket_of;        // per parameter
  std::vector<int64_t> offset_of;    // per parameter: its first element in its bucket's `flat`
  std::vector<bool> ready;           // per parameter, this pass
  int next_launch = 0;
  bool pass_open = false;
  bool sync = true;
  int64_t reductions = 0;

  Reducer(int64_t reducer_id, ProcessGroup& g, std::vector<Tensor> ps, double bucket_mb)
      : id(reducer_id), group(g), params(std::move(ps)) {
    size_t cap = size_t(std::max(0.0, bucket_mb) * 1024 * 1024);
    bucket_of.assign(params.size(), -1);
    offset_of.assign(params.size(), 0);
    ready.assign(params.size(), false);
    // Reverse registration order; a bucket holds one dtype and device.
    for (int i = int(params.size()) - 1; i >= 0; --i) {
      const Tensor& p = params[size_t(i)];
      bool fits = false;
      if (!buckets.empty()) {
        const Bucket& b = buckets.back();
        const Tensor& first = params[size_t(b.params[0])];
        fits = first.dtype() == p.dtype() && first.device() == p.device() && size_t(b.numel) * itemsize(p.dtype()) < cap;
      }
      if (!fits) buckets.push_back({});
      Bucket& b = buckets.back();
      bucket_of[size_t(i)] = int(buckets.size()) - 1;
      offset_of[size_t(i)] = b.numel;
      b.params.push_back(i);
      b.numel += p.numel();
    }
    for (Bucket& b : buckets) b.flat = zeros({b.numel}, params[size_t(b.params[0])].options());
  }

  // A parameter's gradient is final for this pass: into its bucket; full buckets start.
  void grad_ready(int i) {
    if (!sync) return;
    if (!pass_open) {
      pass_open = true;
      queue_backward_callback([this] { finish_pass(); });
    }
    KILN_CHECK(!ready[size_t(i)], "DistributedDataParallel: parameter ", i, " got its gradient twice in one "
               "backward pass (call backward once per forward, or use no_sync() to accumulate)");
    ready[size_t(i)] = true;
    copy_in(i, params[size_t(i)].grad());
    ++buckets[size_t(bucket_of[size_t(i)])].ready;
    launch_ready();
  }

  // The parameter's slice of its bucket's buffer, flat.
  Tensor slot(int i) {
    return buckets[size_t(bucket_of[size_t(i)])].flat.narrow(0, offset_of[size_t(i)], params[size_t(i)].numel());
  }

  // Tensor ops (queued on the device's stream on CUDA, before the bucket's all-reduce).
  void copy_in(int i, const Tensor& grad) { slot(i).copy_(flat_gradient(params[size_t(i)], grad)); }

  // Starts the buckets that are full, in bucket order (the same order on every rank).
  void launch_ready() {
    while (next_launch < int(buckets.size())) {
      Bucket& b = buckets[size_t(next_launch)];
      if (b.ready < int(b.params.size())) return;
      b.work = group.all_reduce_unchecked_async(b.flat, ReduceOp::mean);
      ++reductions;
      ++next_launch;
    }
  }

  // The backward pass ended: parameters it did not reach join with zeros, every bucket is
  // reduced, and the means go into the gradients.
  void finish_pass() {
    pass_open = false;
    for (size_t i = 0; i < params.size(); ++i)
      if (!ready[i]) {
        ready[i] = true;
        copy_in(int(i), Tensor());
        ++buckets[size_t(bucket_of[i])].ready;
      }
    launch_ready();
    for (Bucket& b : buckets) b.work.wait();
    for (Bucket& b : buckets) {
      for (int i : b.params) {
        const Tensor& p = params[size_t(i)];
        // A fresh tensor: the engine may have given two leaves one gradient tensor (the two
        // inputs of an add), so writing into grad() could change another parameter's.
        p.set_grad(slot(i).reshape(p.shape()).clone());
      }
      b.ready = 0;
      b.work = Work();
    }
    std::fill(ready.begin(), ready.end(), false);
    next_launch = 0;
  }
};

// The buckets as a compiled backward traces them (dsl/traced_grad_hooks.h): a bucket's gradients
// concatenated and all-reduced by distributed::all_reduce_start as soon as the last is final, the
// means taken by all_reduce_wait after the rest of the backward. Holds the reducer weakly, as the
// eager hooks do.
class TracedBuckets : public TracedGradHooks {
 public:
  explicit TracedBuckets(std::weak_ptr<DistributedDataParallel::Reducer> r) : reducer_(std::move(r)) {}

  bool active() const override {
    auto r = reducer_.lock();
    return r && r->sync;
  }

  std::vector<TensorList> groups() const override {
    auto r = reducer();
    std::vector<TensorList> out;
    for (const auto& b : r->buckets) {
      out.emplace_back();
      for (int i : b.params) out.back().push_back(r->params[size_t(i)]);
    }
    return out;
  }

  Tensor start(int g, const TensorList& grads) override {
    auto r = reducer();
    TensorList parts;
    for (size_t k = 0; k < grads.size(); ++k)
      parts.push_back(flat_gradient(r->params[size_t(r->buckets[size_t(g)].params[k])], grads[k]));
    Tensor flat = parts.size() == 1 ? parts[0] : cat(parts, 0);
    return all_reduce_start(flat, ReduceOp::mean, r->group, {.checked = false, .tag = r->id});
  }

  TensorList finish(int g, const Tensor& started) override {
    auto r = reducer();
    std::vector<Shape> shapes;
    for (int i : r->buckets[size_t(g)].params) shapes.push_back(r->params[size_t(i)].shape());
    return all_reduce_wait(started, shapes);
  }

 private:
  std::shared_ptr<DistributedDataParallel::Reducer> reducer() const {
    auto r = reducer_.lock();
    KILN_CHECK(r, "DistributedDataParallel: a backward was traced over parameters whose wrapper is gone");
    return r;
  }
  std::weak_ptr<DistributedDataParallel::Reducer> reducer_;
};

namespace {

// Every rank's parameters: count and a hash of names, shapes and dtypes, gathered and compared.
void check_same_parameters(ProcessGroup& group, const std::vector<std::pair<std::string, Tensor>>& named) {
  uint64_t h = kFnvOffset;
  for (const auto& [n, t] : named) {
    std::ostringstream os;
    os << n << ':' << t.dtype() << to_string(t.shape()) << (t.requires_grad() ? "" : " frozen") << ';';
    h = fnv1a(os.str(), h);
  }
  Tensor mine = empty({2}, {DType::i64});
  mine.data<int64_t>()[0] = int64_t(named.size());
  mine.data<int64_t>()[1] = int64_t(h);
  Tensor all = empty({2 * int64_t(group.world_size())}, {DType::i64});
  group.all_gather_async(all, mine).wait();
  for (int r = 0; r < group.world_size(); ++r) {
    const int64_t* theirs = all.data<int64_t>() + 2 * r;
    KILN_CHECK(theirs[0] == mine.data<int64_t>()[0] && theirs[1] == mine.data<int64_t>()[1],
               "DistributedDataParallel: rank ", group.rank(), "'s module has ", named.size(),
               " parameters, rank ", r, "'s has ", theirs[0], (theirs[0] == int64_t(named.size()) ? " with other names, "
               "shapes, dtypes or frozen parameters" : ""), "; every rank must wrap the same model");
  }
}

}  // namespace

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<nn::Module> module, DDPOptions options,
                                                 ProcessGroup* group)
    : module_(register_module("module", std::move(module))) {
  ProcessGroup& g = group ? *group : default_group();
  std::vector<std::pair<std::string, Tensor>> named = module_->named_parameters();
  check_same_parameters(g, named);
  // Those that train, each once (a weight shared by two modules is listed twice): a frozen
  // parameter (requires_grad off) is only broadcast.
  std::vector<Tensor> params;
  for (const auto& [n, p] : named) {
    KILN_CHECK(p.is_contiguous(), "DistributedDataParallel: parameter ", n, " is not contiguous");
    auto same = [&](const Tensor& q) { return q.impl_ptr() == p.impl_ptr(); };
    if (std::find_if(params.begin(), params.end(), same) != params.end()) continue;
    g.broadcast_async(p.detach(), 0).wait();
    if (p.requires_grad()) params.push_back(p);
  }
  static std::atomic<int64_t> next_id{1};
  reducer_ = std::make_shared<Reducer>(next_id++, g, params, options.bucket_mb);
  // The hooks hold the reducer weakly: parameters may outlive the wrapper.
  std::weak_ptr<Reducer> weak = reducer_;
  auto traced = std::make_shared<TracedBuckets>(weak);
  for (size_t i = 0; i < params.size(); ++i)
    hooks_.push_back(params[i].on_grad_ready(
        [weak, i](const Tensor&) {
          if (auto r = weak.lock()) r->grad_ready(int(i));
        },
        traced));
}

// The module outlives its wrapper: its parameters lose the wrapper's hooks, so that a plain
// backward (or another wrapper's) runs without them, compiled as one graph again.
DistributedDataParallel::~DistributedDataParallel() {
  for (GradHookHandle& h : hooks_) h.remove();
}

DistributedDataParallel::NoSync::NoSync(DistributedDataParallel& d) : d_(d), was_(d.reducer_->sync) {
  d_.reducer_->sync = false;
}
DistributedDataParallel::NoSync::~NoSync() { d_.reducer_->sync = was_; }

std::vector<std::vector<int>> DistributedDataParallel::buckets() const {
  std::vector<std::vector<int>> out;
  for (const auto& b : reducer_->buckets) out.push_back(b.params);
  return out;
}

int64_t DistributedDataParallel::reductions() const {
  return reducer_->reductions + all_reduces_started(reducer_->id);
}

}  // namespace kiln::distributed
