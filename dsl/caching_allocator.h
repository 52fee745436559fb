// CachingAllocator: keeps freed blocks of large sizes in per-size-class free lists and hands
// them out again, so that steady-state eager execution neither calls the system allocator nor
// page-faults on fresh memory for every op output. Wraps a raw allocator of one device (the CPU's,
// or CUDA's: dsl/cuda/cuda_allocator.h). Blocks below `min_cached` bytes (64 KiB on the CPU, 0 on
// CUDA) go straight to the raw allocator.
//
//   CachingAllocator& a = cpu_caching_allocator();
//   MemoryStats s = a.stats();   // allocated, reserved (allocated + cached), peak
//   a.empty_cache();             // give cached blocks back
#pragma once
#include <cstddef>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "dsl/storage.h"

namespace kiln {

struct MemoryStats {
  size_t allocated = 0;  // bytes in live blocks (after size-class rounding)
  size_t reserved = 0;   // allocated plus cached
  size_t peak_allocated = 0;
  size_t cached_limit = 0;
};

class CachingAllocator final : public Allocator {
 public:
  CachingAllocator(Allocator& raw, size_t cached_limit, size_t min_cached = size_t(64) << 10)
      : raw_(raw), cached_limit_(cached_limit), min_cached_(min_cached) {}
  ~CachingAllocator() override { empty_cache(); }

  void* allocate(size_t nbytes) override;
  void release(void* ptr, size_t nbytes) override;
  void empty_cache();
  MemoryStats stats() const;
  void reset_peak();

  // The size class a request is rounded up to: 64-byte multiples below 64 KiB, else one of
  // four steps per power of two (at most 25% waste).
  static size_t size_class(size_t nbytes);

 private:
  Allocator& raw_;
  size_t cached_limit_;
  size_t min_cached_;
  mutable std::mutex mu_;
  std::unordered_map<size_t, std::vector<void*>> free_;
  size_t allocated_ = 0, cached_ = 0, peak_ = 0;
};

// The CPU allocator that tensors use: caching, with a limit of KILN_CPU_CACHE_MB (default
// 2048) megabytes of cached blocks.
CachingAllocator& cpu_caching_allocator();

}  // namespace kiln
