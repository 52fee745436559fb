#include "schedules/pipeline_memory.h"

#include <cstdint>

#include "dsl/storage.h"

namespace kiln {

namespace {
// The block's size sits in a header (Halide frees by pointer only); 64 bytes keeps alignment.
constexpr size_t kHeader = 64;
}  // namespace

void* pipeline_malloc(void*, size_t n) {
  auto* p = static_cast<uint8_t*>(allocator_for(Device::cpu()).allocate(n + kHeader));
  *reinterpret_cast<size_t*>(p) = n + kHeader;
  return p + kHeader;
}

void pipeline_free(void*, void* ptr) {
  uint8_t* p = static_cast<uint8_t*>(ptr) - kHeader;
  allocator_for(Device::cpu()).release(p, *reinterpret_cast<size_t*>(p));
}

}  // namespace kiln
