#include "dsl/caching_allocator.h"
#include "dsl/settings.h"

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

void* CachingAllocator::allocate(size_t nbytes) {
  size_t size = size_class(nbytes);
  if (size >= min_cached_) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = free_.find(size);
    if (it != free_.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      cached_ -= size;
      allocated_ += size;
      peak_ = std::max(peak_, allocated_);
      return p;
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
  return p;
}

void CachingAllocator::release(void* ptr, size_t nbytes) {
  size_t size = size_class(nbytes);
  {
    std::lock_guard<std::mutex> lock(mu_);
    allocated_ -= size;
    if (size >= min_cached_ && cached_ + size <= cached_limit_) {
      free_[size].push_back(ptr);
      cached_ += size;
      return;
    }
  }
  raw_.release(ptr, size);
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
  return {allocated_, allocated_ + cached_, peak_, cached_limit_};
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
