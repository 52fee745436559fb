// Collectives across processes, as torch.distributed: one process per device, started by `kiln
// run --nproc N` (launch.h) or any launcher that sets the rendezvous variables torchrun sets:
// RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (and LOCAL_RANK, the device index on this host).
//
//   distributed::init_process_group();          // from the environment
//   distributed::all_reduce(grad, ReduceOp::mean);
//   distributed::broadcast(weights, /*src=*/0);
//
// The engine is chosen by the tensors' device: Gloo (TCP) for CPU tensors, NCCL (libnccl.so.2,
// loaded at run time) for CUDA tensors, one communicator per group on the device of its first
// CUDA collective. Collectives run in the order each rank issues them, on one communication
// thread per group; the `_async` forms return a Work to wait on. A CUDA collective runs on the
// group's communication stream: it starts after the work kiln's stream (dsl/cuda/cuda_context.h)
// held when it was issued, overlaps what kiln queues after it, and Work::wait() makes kiln's
// stream wait for it (as torch.distributed's async work does with its NCCL stream).
//
// Errors, not hangs: every collective first checks, through Gloo, that all ranks called the same
// collective on tensors of the same dtype and shape (else kiln::Error naming both ranks'
// tensors), and on Gloo a rank that died, or one that never arrives within the timeout
// (KILN_DIST_TIMEOUT_S), is a kiln::Error on the others. A NCCL collective not done on the device
// within the timeout, or an asynchronous NCCL error, makes the group's watchdog abort the
// communicator (nccl_stream.h); the group's next collective is then a kiln::Error. After such an
// error the group is unusable: destroy it (or end the process).
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <string>

#include "dsl/tensor.h"

namespace kiln::distributed {

enum class ReduceOp { sum, mean, max, min };
std::string_view name(ReduceOp op);

// A collective in flight: wait() returns once it is done, and throws its error if it failed. For
// a CUDA collective, "done" means ordered: after wait(), work queued on kiln's stream runs after
// the collective (the host does not wait for the device).
class Work {
 public:
  Work() = default;
  // `then` runs in each wait() once `done` is ready.
  explicit Work(std::shared_future<void> done, std::function<void()> then = {})
      : done_(std::move(done)), then_(then ? std::make_shared<std::function<void()>>(std::move(then)) : nullptr) {}
  void wait() const;
  // Done on the host: for a CUDA collective, queued on the device (wait() then orders kiln's
  // stream after it).
  bool completed() const;

 private:
  std::shared_future<void> done_;
  std::shared_ptr<std::function<void()>> then_;
};

struct InitOptions {
  // Rendezvous; negative or empty: from RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT.
  int rank = -1;
  int world_size = -1;
  std::string master_addr;
  int master_port = -1;
  // How long a collective or the rendezvous may wait for the other ranks (<= 0: KILN_DIST_TIMEOUT_S).
  std::chrono::milliseconds timeout{0};
};

class ProcessGroup {
 public:
  explicit ProcessGroup(const InitOptions& options);
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const;
  int world_size() const;
  // Unique among the process's groups (1 for the first): how graph nodes name their group.
  int64_t id() const;

  // In place: every rank's t becomes the reduction of all ranks' t.
  Work all_reduce_async(Tensor t, ReduceOp op = ReduceOp::sum);
  // all_reduce_async without the check that every rank called it on the same shape: for callers
  // whose calls match by construction (DistributedDataParallel's buckets).
  Work all_reduce_unchecked_async(Tensor t, ReduceOp op);
  // In place: every rank's t becomes rank src's t.
  Work broadcast_async(Tensor t, int src);
  // out (world_size * n elements, dim 0 world_size times input's) gets every rank's input, in rank order.
  Work all_gather_async(Tensor out, Tensor input);
  // out (input's numel / world_size elements) gets this rank's part of the reduction of all inputs.
  Work reduce_scatter_async(Tensor out, Tensor input, ReduceOp op = ReduceOp::sum);
  Work barrier_async();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// The live group with this id; kiln::Error once it was destroyed.
ProcessGroup& group_with_id(int64_t id);

// The process's default group (init_process_group makes it; kiln::Error before that).
ProcessGroup& init_process_group(const InitOptions& options = {});
bool is_initialized();
ProcessGroup& default_group();
void destroy_process_group();
int rank();
int world_size();

// The default group's collectives, waited on.
void all_reduce(const Tensor& t, ReduceOp op = ReduceOp::sum);
void broadcast(const Tensor& t, int src);
void all_gather(const Tensor& out, const Tensor& input);
void reduce_scatter(const Tensor& out, const Tensor& input, ReduceOp op = ReduceOp::sum);
void barrier();

}  // namespace kiln::distributed
