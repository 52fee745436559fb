#include "dsl/caching_allocator.h"
#include "dsl/error.h"
#include "dsl/settings.h"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <string>

namespace kiln {

namespace {
constexpr size_t kMinCached = size_t(64) << 10;
}  // namespace

size_t CachingAllocator::size_class(size_t nbytes) {
  if (nbytes < kMinCached) return (nbytes + 63) / 64 * 64;
  size_t top = std::bit_floor(nbytes);
  size_t step = top / 4;
  return (nbytes + step - 1) / step * step;
}

void* CachingAllocator::take_cached(std::unordered_map<size_t, std::vector<void*>>& lists, size_t size) {
  auto it = lists.find(size);
  if (it == lists.end() || it->second.empty()) return nullptr;
  void* p = it->second.back();
  it->second.pop_back();
  return p;
}

void* CachingAllocator::allocate(size_t nbytes) {
  size_t size = size_class(nbytes);
  PoolId pool = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto open = open_.find(std::this_thread::get_id()); open != open_.end()) pool = open->second;
    if (pool != 0) {  // every size is kept in a pool
      Pool& pl = pools_.at(pool);
      if (void* p = take_cached(pl.free, size)) {
        pl.cached -= size;
        pl.live += size;
        allocated_ += size;
        peak_ = std::max(peak_, allocated_);
        return p;
      }
    } else if (size >= min_cached_) {
      if (void* p = take_cached(free_, size)) {
        cached_ -= size;
        allocated_ += size;
        peak_ = std::max(peak_, allocated_);
        return p;
      }
    }
  }
  void* p = nullptr;
  try {
    p = raw_.allocate(size);
  } catch (const std::exception&) {
    empty_cache();  // out of memory: give the cache back and try once more
    p = raw_.allocate(size);
  }
  std::lock_guard<std::mutex> lock(mu_);
  allocated_ += size;
  peak_ = std::max(peak_, allocated_);
  if (pool != 0) {
    pools_.at(pool).live += size;
    pool_of_[p] = pool;
  }
  return p;
}

void CachingAllocator::release(void* ptr, size_t nbytes) {
  size_t size = size_class(nbytes);
  {
    std::lock_guard<std::mutex> lock(mu_);
    allocated_ -= size;
    if (auto owner = pool_of_.find(ptr); owner != pool_of_.end()) {
      auto pl = pools_.find(owner->second);
      pl->second.live -= size;
      if (!pl->second.released) {
        pl->second.free[size].push_back(ptr);
        pl->second.cached += size;
        return;
      }
      pool_of_.erase(owner);  // the pool is gone: the block joins the general cache
      if (pl->second.live == 0) pools_.erase(pl);
    }
    if (size >= min_cached_ && cached_ + size <= cached_limit_) {
      free_[size].push_back(ptr);
      cached_ += size;
      return;
    }
  }
  raw_.release(ptr, size);
}

CachingAllocator::PoolId CachingAllocator::create_pool() {
  std::lock_guard<std::mutex> lock(mu_);
  PoolId id = next_pool_++;
  pools_[id];
  return id;
}

void CachingAllocator::begin_pool(PoolId pool) {
  std::lock_guard<std::mutex> lock(mu_);
  auto pl = pools_.find(pool);
  KILN_CHECK(pl != pools_.end() && !pl->second.released, "CachingAllocator: pool ", pool,
             " does not exist or was released");
  KILN_CHECK(open_.emplace(std::this_thread::get_id(), pool).second, "CachingAllocator: this thread already has pool ",
             open_.at(std::this_thread::get_id()), " open (one at a time)");
}

void CachingAllocator::end_pool() {
  std::lock_guard<std::mutex> lock(mu_);
  open_.erase(std::this_thread::get_id());
}

void CachingAllocator::release_pool(PoolId pool) {
  std::vector<std::pair<void*, size_t>> to_raw;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto pl = pools_.find(pool);
    KILN_CHECK(pl != pools_.end() && !pl->second.released, "CachingAllocator: pool ", pool,
               " does not exist or was released already");
    for (const auto& [thread, open] : open_)
      KILN_CHECK(open != pool, "CachingAllocator: pool ", pool, " is still open on a thread");
    for (auto& [size, list] : pl->second.free)
      for (void* p : list) {
        pool_of_.erase(p);
        if (size >= min_cached_ && cached_ + size <= cached_limit_) {
          free_[size].push_back(p);
          cached_ += size;
        } else {
          to_raw.emplace_back(p, size);
        }
      }
    pl->second.free.clear();
    pl->second.cached = 0;
    pl->second.released = true;
    if (pl->second.live == 0) pools_.erase(pl);
  }
  for (auto& [p, size] : to_raw) raw_.release(p, size);
}

size_t CachingAllocator::pool_reserved(PoolId pool) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto pl = pools_.find(pool);
  KILN_CHECK(pl != pools_.end(), "CachingAllocator: pool ", pool, " does not exist");
  return pl->second.live + pl->second.cached;
}

void CachingAllocator::empty_cache() {
  std::unordered_map<size_t, std::vector<void*>> blocks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    blocks.swap(free_);
    cached_ = 0;
  }
  for (auto& [size, list] : blocks)
    for (void* p : list) raw_.release(p, size);
}

MemoryStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t pooled = 0;
  for (const auto& [id, pl] : pools_) pooled += pl.cached;
  return {allocated_, allocated_ + cached_ + pooled, peak_, cached_limit_};
}

void CachingAllocator::reset_peak() {
  std::lock_guard<std::mutex> lock(mu_);
  peak_ = allocated_;
}

CachingAllocator& cpu_caching_allocator() {
  static CachingAllocator* a = [] {
    auto mb = size_t(int_setting("KILN_CPU_CACHE_MB", 2048, 0, int64_t(1) << 40));
    return new CachingAllocator(cpu_allocator(), mb << 20);  // never destroyed: tensors may outlive statics
  }();
  return *a;
}

}  // namespace kiln
