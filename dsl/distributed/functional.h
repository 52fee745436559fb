// Collectives as ops, as torch.distributed's functional collectives (all_reduce, then
// wait_tensor): one op starts an all-reduce and returns a new tensor that will hold the result,
// another waits for it. Between the two, other work runs while the collective is in flight; a
// compiled graph places its other steps there (DistributedDataParallel's compiled backward
// starts each gradient bucket as soon as it is final and waits at the end).
//
//   Tensor started = all_reduce_start(flat, ReduceOp::mean, group);  // the reduction is in flight
//   TensorList parts = all_reduce_wait(started, {{64, 32}, {32}});     // the result, cut into two tensors
//
// `started` may be read only through all_reduce_wait (its memory is written while in flight). One
// dropped without a wait (a step that threw between the two) is waited for and let go by the
// next all_reduce_start.
// Both are ops (distributed::all_reduce_start, distributed::all_reduce_wait; not differentiable)
// with the OpDef property `collective`: eagerly they run at once; traced, they are graph nodes
// that run as steps between the compiled pipelines; graph passes never merge, drop or recompute
// them, and a call that holds one is not captured in a CUDA graph. Every rank must run the same
// collectives in the same order, as for the group's other collectives.
#pragma once
#include <cstdint>
#include <vector>

#include "dsl/distributed/process_group.h"
#include "dsl/op_def.h"

namespace kiln::distributed {

struct StartOptions {
  // Check across ranks that every rank started the same all-reduce on the same dtype and shape
  // (the group's all_reduce does); off for callers whose calls match by construction.
  bool checked = true;
  // Counted under this tag (all_reduces_started): DistributedDataParallel counts its buckets' so.
  int64_t tag = 0;
};

// A new contiguous tensor that becomes the reduction of every rank's `t` over `group`.
Tensor all_reduce_start(const Tensor& t, ReduceOp op, ProcessGroup& group, StartOptions options = {});
// Waits for the all-reduce that made `started` and returns its result cut into tensors of
// these shapes, one after another (their elements together: started's): contiguous views of one
// buffer, as PyTorch's DDP hands out gradients as views of its buckets, so no copy is made. One
// shape, started's own, gives the result whole.
TensorList all_reduce_wait(const Tensor& started, const std::vector<Shape>& shapes);

// All-reduces that all_reduce_start has started in this process under `tag`, eager or in
// compiled graphs.
int64_t all_reduces_started(int64_t tag);

// All-reduces started and not yet waited for (nor abandoned and let go).
int64_t all_reduces_in_flight();

// The two ops (registered on first use, and by init_process_group).
const OpDef& all_reduce_start_op();
const OpDef& all_reduce_wait_op();

}  // namespace kiln::distributed
