// How a process group's NCCL collectives meet kiln's stream, and the watchdog over them.
//
// CudaOrder: a CUDA collective runs on the group's communication stream. It starts after the
// event `issued`, recorded on kiln's stream when the collective was issued (its inputs'
// producers), and kiln's stream waits for the event `done`, recorded after the NCCL call, at
// Work::wait (join); a CudaOrder destroyed unjoined (its Work dropped) waits for `done` on the
// host instead. The tensors stay referenced until then, so that the caching allocator cannot
// hand their memory to a kernel on kiln's stream while NCCL still uses it.
//
// NcclWatchdog: owns the communicator. Its thread looks at the collectives in flight every
// 100 ms; one not done on the device within the group's timeout (KILN_DIST_TIMEOUT_S, counted
// from when it was issued, as torch's NCCL watchdog counts), or an asynchronous NCCL error (a
// peer died, a network failure), aborts the communicator (ncclCommAbort: NCCL's kernels return,
// so nothing waits on the device forever), and every later collective of the group is a
// kiln::Error saying why. Results of the aborted collectives are undefined.
#pragma once
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "dsl/cuda/nccl_api.h"
#include "dsl/tensor.h"

namespace kiln::distributed {

class CudaOrder {
 public:
  CudaOrder(int device, TensorList tensors);  // records `issued` on kiln's stream
  ~CudaOrder();  // unjoined: the host waits for `done`; the events destroyed
  CudaOrder(const CudaOrder&) = delete;
  CudaOrder& operator=(const CudaOrder&) = delete;

  // On the communication thread, around the NCCL call on `comm`.
  void before(CUstream comm);
  void after(CUstream comm);
  // kiln's stream waits for the collective (once); its tensors may go.
  void join();
  // Whether the collective is done on the device (cuEventQuery of `done`); kiln::Error for a
  // device error.
  bool done_on_device() const;

 private:
  int device_;
  TensorList tensors_;
  CUevent issued_ = nullptr, done_ = nullptr;
  std::mutex mu_;
  bool joined_ = false;
};

// The order of a collective on these tensors, if they are on a CUDA device (else null).
std::shared_ptr<CudaOrder> cuda_order(TensorList tensors);

class NcclWatchdog {
 public:
  // `who`: "rank 1 of 4", for messages.
  NcclWatchdog(ncclComm_t comm, std::chrono::milliseconds timeout, std::string who);
  ~NcclWatchdog();  // the thread stopped; the communicator destroyed (unless aborted)
  NcclWatchdog(const NcclWatchdog&) = delete;
  NcclWatchdog& operator=(const NcclWatchdog&) = delete;

  ncclComm_t comm() const { return comm_; }
  // kiln::Error naming `op` once the communicator was aborted; else runs `call` (the NCCL call
  // with `order`'s events around it) where no abort can come between, and watches `order`.
  void issue(std::string_view op, const std::shared_ptr<CudaOrder>& order, const std::function<void()>& call);

 private:
  void watch();
  void abort_locked(const std::string& why);

  ncclComm_t comm_;
  std::chrono::milliseconds timeout_;
  std::string who_;
  struct InFlight {
    std::shared_ptr<CudaOrder> order;
    std::string op;
    std::chrono::steady_clock::time_point issued;
  };
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<InFlight> in_flight_;
  std::string aborted_;  // why ("" while the communicator works)
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace kiln::distributed
