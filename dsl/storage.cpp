#include "dsl/storage.h"

#include <cstdlib>
#include <new>

#include "dsl/caching_allocator.h"
#include "dsl/cuda/cuda_allocator.h"
#include "dsl/cuda/cuda_api.h"
#include "dsl/error.h"

namespace kiln {

namespace {

class CpuAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes) override {
    size_t rounded = (nbytes + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, rounded ? rounded : 64);
    if (!p) throw_error("cpu allocator: out of memory allocating ", nbytes, " bytes");
    return p;
  }
  void release(void* ptr, size_t) override { std::free(ptr); }
};

}  // namespace

Allocator& cpu_allocator() {
  static CpuAllocator a;
  return a;
}

Allocator& allocator_for(Device d) {
  if (d.is_cpu()) return cpu_caching_allocator();
  KILN_CHECK(cuda_available(), "device ", d, ": no CUDA device is usable (", cuda_unavailable_reason(),
             "); use Device::cpu()");
  return cuda_caching_allocator(d.index);
}

Storage::~Storage() {
  if (allocator && data) allocator->release(data, nbytes);
}

std::shared_ptr<Storage> Storage::allocate(size_t nbytes, Device device) {
  Allocator& a = allocator_for(device);
  return std::make_shared<Storage>(a.allocate(nbytes), nbytes, device, &a);
}

}  // namespace kiln
