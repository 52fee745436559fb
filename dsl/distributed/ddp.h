// DistributedDataParallel: data-parallel training as PyTorch's DDP. Every rank holds the whole
// model and trains on its own part of each batch; the wrapper keeps the ranks' parameters equal.
//
//   distributed::init_process_group();
//   auto model = std::make_shared<nn::Mlp>(...);
//   distributed::DistributedDataParallel ddp(model);   // rank 0's parameters on every rank
//   optim::AdamW opt(ddp.parameters(), {...});
//   Tensor loss = loss_fn(ddp.forward(x_of_this_rank), y_of_this_rank);
//   loss.backward();        // gradients all-reduced (mean over ranks) before it returns
//   opt.step();
//
// Gradients go in buckets of about `bucket_mb` (parameters in reverse registration order, the
// order a backward usually finishes them); a bucket's all-reduce starts on the communication
// thread as soon as its last gradient is ready (Tensor::on_grad_ready), while the backward goes
// on, and the backward waits for all of them at its end (queue_backward_callback). Buckets start
// in the same order on every rank. A parameter that got no gradient in a backward (not used by
// this forward) takes part with zeros, so every rank reduces the same buckets; its grad() is then
// the mean of the others'.
//
// Inside a compiled function the backward over a DDP module's parameters is traced with the
// buckets' all-reduces as nodes of the backward graph (dsl/distributed/functional.h): each bucket
// starts as soon as its last gradient is computed, the graph's later steps run while it is in
// flight, and the means are taken after the backward; the forward, backward and optimizer step
// stay one graph. That needs the parameters to hold no gradient when the backward starts (a step
// that ends with zero_grad()); otherwise, and inside no_sync() (a guard of the compiled
// function), that backward runs eagerly, as does the first synced one after no_sync(), whose
// parameters hold the accumulated gradients.
//
// Destroying the wrapper removes its hooks from the parameters; the module trains on as before.
//
// no_sync(): backward passes inside its scope keep gradients local (they accumulate in grad());
// the first backward after it all-reduces the accumulated sum, for gradient accumulation.
#pragma once
#include <memory>
#include <vector>

#include "dsl/distributed/process_group.h"
#include "dsl/nn/module.h"

namespace kiln::distributed {

struct DDPOptions {
  double bucket_mb = 25;  // as PyTorch's bucket_cap_mb
};

class DistributedDataParallel : public nn::Module {
 public:
  // Checks that every rank's module has the same parameters (names, shapes, dtypes) and
  // broadcasts rank 0's values. `group` defaults to the default group.
  explicit DistributedDataParallel(std::shared_ptr<nn::Module> module, DDPOptions options = {},
                                   ProcessGroup* group = nullptr);
  ~DistributedDataParallel() override;

  Tensor forward(const Tensor& x) override { return module_->forward(x); }
  nn::Module& module() { return *module_; }

  class NoSync {
   public:
    explicit NoSync(DistributedDataParallel& d);
    ~NoSync();
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;

   private:
    DistributedDataParallel& d_;
    bool was_;
  };
  NoSync no_sync() { return NoSync(*this); }

  // Buckets as planned: their parameters' indices among the parameters that require grad, in
  // parameters()' order (a frozen parameter is broadcast at construction and then left alone).
  std::vector<std::vector<int>> buckets() const;
  // Gradient all-reduces issued so far (one per bucket per synced backward, eager or compiled).
  int64_t reductions() const;

  struct Reducer;  // ddp.cpp

 private:
  std::shared_ptr<nn::Module> module_;
  std::shared_ptr<Reducer> reducer_;
  std::vector<GradHookHandle> hooks_;  // one per parameter that trains
};

}  // namespace kiln::distributed
