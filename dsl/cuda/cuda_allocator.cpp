#include "dsl/cuda/cuda_allocator.h"

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "dsl/cuda/cuda_context.h"
#include "dsl/error.h"
#include "dsl/settings.h"

namespace kiln {

namespace {

std::atomic<uint64_t> allocations{0};

class CudaRawAllocator final : public Allocator {
 public:
  explicit CudaRawAllocator(int index) : index_(index) {}
  void* allocate(size_t nbytes) override {
    cuda_context(index_);
    CUdeviceptr p = 0;
    CUresult rc = cuda_api().cuMemAlloc(&p, nbytes ? nbytes : 1);
    if (rc != 0) {
      size_t free_b = 0, total_b = 0;
      cuda_api().cuMemGetInfo(&free_b, &total_b);
      throw_error("cuda allocator: out of memory on cuda:", index_, " allocating ", nbytes, " bytes (",
                  free_b >> 20, " MiB free of ", total_b >> 20, " MiB; CUDA error ", rc, ")");
    }
    allocations++;
    return reinterpret_cast<void*>(p);
  }
  void release(void* ptr, size_t) override {
    cuda_context(index_);
    cuda_api().cuMemFree(reinterpret_cast<CUdeviceptr>(ptr));
  }

 private:
  int index_;
};

}  // namespace

CachingAllocator& cuda_caching_allocator(int index) {
  static std::mutex mu;
  static auto* allocators = new std::vector<std::unique_ptr<CachingAllocator>>();  // never destroyed
  static auto* raws = new std::vector<std::unique_ptr<CudaRawAllocator>>();
  cuda_context(index);  // checks that the device exists
  std::lock_guard<std::mutex> lock(mu);
  if (allocators->size() <= size_t(index)) {
    allocators->resize(size_t(index) + 1);
    raws->resize(size_t(index) + 1);
  }
  auto& a = (*allocators)[size_t(index)];
  if (!a) {
    // No cap by default: a cap below a training step's working set sends every free past it to
    // cuMemFree, which waits for the device (GPT-2 small's eager step, 39.6 GB live, ran 14x
    // PyTorch's time so). An allocation that fails empties the cache and tries again.
    size_t limit = SIZE_MAX;
    if (int64_t mb = int_setting("KILN_CUDA_CACHE_MB", -1, 0, int64_t(1) << 40); mb >= 0) limit = size_t(mb) << 20;
    (*raws)[size_t(index)] = std::make_unique<CudaRawAllocator>(index);
    a = std::make_unique<CachingAllocator>(*(*raws)[size_t(index)], limit, /*min_cached=*/0);
  }
  return *a;
}

uint64_t cuda_driver_allocations() { return allocations.load(); }

}  // namespace kiln
