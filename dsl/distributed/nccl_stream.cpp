#include "dsl/distributed/nccl_stream.h"

#include <sstream>

#include "dsl/cuda/cuda_context.h"
#include "dsl/error.h"

namespace kiln::distributed {

CudaOrder::CudaOrder(int device, TensorList tensors) : device_(device), tensors_(std::move(tensors)) {
  const CudaApi& api = cuda_api();
  CudaContext& c = cuda_context(device_);
  check_cuda(api.cuEventCreate(&issued_, 0x2 /* CU_EVENT_DISABLE_TIMING */), "nccl: cuEventCreate");
  check_cuda(api.cuEventCreate(&done_, 0x2), "nccl: cuEventCreate");
  check_cuda(api.cuEventRecord(issued_, c.stream), "nccl: cuEventRecord");
}

// Not joined (its Work was dropped unwaited): the host waits for the collective rather than
// putting a wait on kiln's stream from whatever thread drops the last reference (that could land
// inside a CUDA-graph capture on another thread).
CudaOrder::~CudaOrder() {
  try {
    std::lock_guard<std::mutex> lock(mu_);
    if (!joined_) {
      cuda_context(device_);
      cuda_api().cuEventSynchronize(done_);
    }
  } catch (...) {  // a destructor does not throw; a broken context fails later kernels too
  }
  tensors_.clear();
  cuda_api().cuEventDestroy(issued_);
  cuda_api().cuEventDestroy(done_);
}

void CudaOrder::before(CUstream comm) {
  check_cuda(cuda_api().cuStreamWaitEvent(comm, issued_, 0), "nccl: cuStreamWaitEvent");
}

void CudaOrder::after(CUstream comm) { check_cuda(cuda_api().cuEventRecord(done_, comm), "nccl: cuEventRecord"); }

void CudaOrder::join() {
  std::lock_guard<std::mutex> lock(mu_);
  if (joined_) return;
  joined_ = true;
  check_cuda(cuda_api().cuStreamWaitEvent(cuda_context(device_).stream, done_, 0), "nccl: cuStreamWaitEvent");
  tensors_.clear();
}

bool CudaOrder::done_on_device() const {
  cuda_context(device_);  // current on the calling thread
  CUresult r = cuda_api().cuEventQuery(done_);
  if (r == kCudaErrorNotReady) return false;
  check_cuda(r, "nccl: cuEventQuery");
  return true;
}

std::shared_ptr<CudaOrder> cuda_order(TensorList tensors) {
  if (!tensors[0].device().is_cuda()) return nullptr;
  int device = tensors[0].device().index;
  return std::make_shared<CudaOrder>(device, std::move(tensors));
}

NcclWatchdog::NcclWatchdog(ncclComm_t comm, std::chrono::milliseconds timeout, std::string who)
    : comm_(comm), timeout_(timeout), who_(std::move(who)), thread_([this] { watch(); }) {}

NcclWatchdog::~NcclWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_one();
  thread_.join();
  in_flight_.clear();
  if (aborted_.empty()) nccl_api().ncclCommDestroy(comm_);
}

void NcclWatchdog::issue(std::string_view op, const std::shared_ptr<CudaOrder>& order,
                         const std::function<void()>& call) {
  std::lock_guard<std::mutex> lock(mu_);
  KILN_CHECK(aborted_.empty(), op, " on ", who_, ": the group's NCCL communicator was aborted: ", aborted_,
             " (destroy the group; collectives on it cannot run again)");
  call();
  in_flight_.push_back({order, std::string(op), std::chrono::steady_clock::now()});
}

void NcclWatchdog::abort_locked(const std::string& why) {
  aborted_ = why;
  nccl_api().ncclCommAbort(comm_);
  in_flight_.clear();
}

void NcclWatchdog::watch() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    cv_.wait_for(lock, std::chrono::milliseconds(100));
    if (stopping_ || !aborted_.empty()) continue;
    try {
      auto now = std::chrono::steady_clock::now();
      for (size_t i = 0; i < in_flight_.size();) {
        const InFlight& f = in_flight_[i];
        if (f.order->done_on_device()) {
          in_flight_.erase(in_flight_.begin() + int64_t(i));
          continue;
        }
        if (now - f.issued > timeout_) {
          std::ostringstream why;
          why << f.op << " was not done " << double(timeout_.count()) / 1000
              << " s after it was issued (KILN_DIST_TIMEOUT_S; another rank may have died or not issued it)";
          abort_locked(why.str());
          break;
        }
        ++i;
      }
      ncclResult_t async = nccl::kSuccess;
      if (aborted_.empty() && nccl_api().ncclCommGetAsyncError(comm_, &async) == nccl::kSuccess &&
          async != nccl::kSuccess && async != nccl::kInProgress) {
        const char* text = nccl_api().ncclGetErrorString(async);
        abort_locked(std::string("NCCL reported an asynchronous error: ") + (text ? text : "unknown") +
                     " (a peer may have died)");
      }
    } catch (const Error& e) {  // a device error while querying: the communicator cannot be trusted
      abort_locked(e.what());
    }
  }
}

}  // namespace kiln::distributed
