// CachingAllocator: keeps freed blocks of large sizes in per-size-class free lists and hands
// them out again, so that steady-state eager execution neither calls the system allocator nor
// page-faults on fresh memory for every op output. Wraps a raw allocator of one device (the CPU's,
// or CUDA's: dsl/cuda/cuda_allocator.h). Blocks below `min_cached` bytes (64 KiB on the CPU, 0 on
// CUDA) go straight to the raw allocator.
//
//   CachingAllocator& a = cpu_caching_allocator();
//   MemoryStats s = a.stats();   // allocated, reserved (allocated + cached), peak
//   a.empty_cache();             // give cached blocks back
//
// Private pools, for CUDA graphs (a replay writes to the addresses its capture was given): while
// a thread has a pool open, its allocations come from that pool, and a block allocated there goes
// back to that pool when freed, whenever and by whichever thread. Blocks of a pool are never handed
// to allocations outside it, and empty_cache() leaves them. release_pool() hands its cached blocks
// back, and its live ones as they are freed.
//
//   PoolId pool = a.create_pool();
//   { PoolScope in(a, pool); capture(); }   // what capture() allocates stays in the pool
//   a.release_pool(pool);                   // when no replay will run again
#pragma once
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <thread>
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
  using PoolId = uint64_t;  // 0 is no pool
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

  PoolId create_pool();
  // The calling thread allocates from `pool` until end_pool(); one pool a thread at a time.
  void begin_pool(PoolId pool);
  void end_pool();
  void release_pool(PoolId pool);
  // Bytes a pool holds: its live blocks and its cached ones (kiln::Error for an unknown pool).
  size_t pool_reserved(PoolId pool) const;

 private:
  struct Pool {
    std::unordered_map<size_t, std::vector<void*>> free;
    size_t live = 0, cached = 0;  // bytes
    bool released = false;
  };
  void* take_cached(std::unordered_map<size_t, std::vector<void*>>& lists, size_t size);

  Allocator& raw_;
  size_t cached_limit_;
  size_t min_cached_;
  mutable std::mutex mu_;
  std::unordered_map<size_t, std::vector<void*>> free_;
  size_t allocated_ = 0, cached_ = 0, peak_ = 0;  // cached_: outside pools
  std::unordered_map<PoolId, Pool> pools_;
  std::unordered_map<void*, PoolId> pool_of_;  // every block a pool holds, live or cached
  std::unordered_map<std::thread::id, PoolId> open_;  // the pool each thread allocates from
  PoolId next_pool_ = 1;
};

// A pool open on this thread for the scope's lifetime.
class PoolScope {
 public:
  PoolScope(CachingAllocator& a, CachingAllocator::PoolId pool) : a_(a) { a_.begin_pool(pool); }
  ~PoolScope() { a_.end_pool(); }
  PoolScope(const PoolScope&) = delete;
  PoolScope& operator=(const PoolScope&) = delete;

 private:
  CachingAllocator& a_;
};

// The CPU allocator that tensors use: caching, with a limit of KILN_CPU_CACHE_MB (default
// 2048) megabytes of cached blocks.
CachingAllocator& cpu_caching_allocator();

}  // namespace kiln
