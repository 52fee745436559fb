// The caching allocator: size classes, reuse of freed blocks, statistics, the cache limit, and
// tensors staying intact when their memory comes from the cache, private pools.
#include <thread>
#include <vector>

#include "dsl/caching_allocator.h"
#include "support/reference.h"

using namespace kiln;
using namespace kiln::test;

namespace {

// Counts what reaches the system allocator.
class CountingAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes) override {
    ++allocations;
    return cpu_allocator().allocate(nbytes);
  }
  void release(void* p, size_t nbytes) override {
    ++releases;
    cpu_allocator().release(p, nbytes);
  }
  int allocations = 0, releases = 0;
};

}  // namespace

BOOST_AUTO_TEST_CASE(size_classes_round_up_by_at_most_a_quarter) {
  BOOST_TEST(CachingAllocator::size_class(1) == 64u);
  BOOST_TEST(CachingAllocator::size_class(1000) == 1024u);
  for (size_t n : {size_t(65536), size_t(70000), size_t(1) << 20, (size_t(1) << 20) + 1, size_t(123456789)}) {
    size_t c = CachingAllocator::size_class(n);
    BOOST_TEST(c >= n);
    BOOST_TEST(double(c) <= 1.25 * double(n) + 64);
    BOOST_TEST(CachingAllocator::size_class(c) == c);  // classes are fixed points
  }
}

BOOST_AUTO_TEST_CASE(freed_large_blocks_are_reused_and_counted) {
  CountingAllocator raw;
  {
    CachingAllocator cache(raw, size_t(64) << 20);
    const size_t n = size_t(1) << 20;
    void* a = cache.allocate(n);
    BOOST_TEST(cache.stats().allocated == n);
    cache.release(a, n);
    MemoryStats s = cache.stats();
    BOOST_TEST(s.allocated == 0u);
    BOOST_TEST(s.reserved == n);
    void* b = cache.allocate(n - 100);  // same size class: the cached block comes back
    BOOST_TEST(b == a);
    BOOST_TEST(raw.allocations == 1);
    void* c = cache.allocate(n);  // a second live block needs the system
    BOOST_TEST(raw.allocations == 2);
    BOOST_TEST(cache.stats().peak_allocated == 2 * n);
    cache.release(b, n - 100);
    cache.release(c, n);
    cache.empty_cache();
    BOOST_TEST(raw.releases == 2);
    BOOST_TEST(cache.stats().reserved == 0u);

    void* small = cache.allocate(100);  // small blocks are never cached
    cache.release(small, 100);
    BOOST_TEST(raw.releases == 3);
  }
}

BOOST_AUTO_TEST_CASE(cache_limit_is_respected) {
  CountingAllocator raw;
  CachingAllocator cache(raw, size_t(3) << 20);
  const size_t n = size_t(1) << 20;
  std::vector<void*> blocks;
  for (int i = 0; i < 5; ++i) blocks.push_back(cache.allocate(n));
  for (void* p : blocks) cache.release(p, n);
  BOOST_TEST(cache.stats().reserved <= size_t(3) << 20);
  BOOST_TEST(raw.releases == 2);  // what did not fit went back
}

BOOST_AUTO_TEST_CASE(tensors_from_reused_memory_hold_their_values) {
  // Allocate and free large outputs repeatedly: every result must still match the reference.
  for (int round = 0; round < 6; ++round) {
    Tensor a = random_tensor({300, 257}, f32, 10 + round), b = random_tensor({300, 257}, f32, 20 + round);
    Tensor c = a * b + a;
    std::vector<double> va = host_values(a), vb = host_values(b), want;
    for (size_t i = 0; i < va.size(); ++i) want.push_back(double(float(va[i] * vb[i])) + va[i]);
    check_close(c, want, {300, 257}, "round " + std::to_string(round));
  }
  MemoryStats s = cpu_caching_allocator().stats();
  BOOST_TEST(s.reserved >= s.allocated);
  BOOST_TEST(s.peak_allocated >= s.allocated);
}

// The CUDA allocator's configuration (min_cached 0): blocks of every size are cached, so a loop of
// small allocations reaches the raw allocator only on its first pass; reset_peak starts a new
// high-water mark from what is live.
BOOST_AUTO_TEST_CASE(caching_every_size_reaches_a_steady_state) {
  CountingAllocator raw;
  CachingAllocator cache(raw, size_t(64) << 20, /*min_cached=*/0);
  auto pass = [&] {
    std::vector<std::pair<void*, size_t>> live;
    for (size_t n : {size_t(4), size_t(100), size_t(4096), size_t(70000)}) live.emplace_back(cache.allocate(n), n);
    for (auto& [p, n] : live) cache.release(p, n);
  };
  pass();
  int first = raw.allocations;
  BOOST_TEST(first == 4);
  for (int i = 0; i < 10; ++i) pass();
  BOOST_TEST(raw.allocations == first);
  BOOST_TEST(raw.releases == 0);
  void* p = cache.allocate(100);
  cache.reset_peak();
  BOOST_TEST(cache.stats().peak_allocated == CachingAllocator::size_class(100));
  cache.release(p, 100);
  cache.empty_cache();
  BOOST_TEST(raw.releases == 4);
}

// A private pool (for CUDA graphs): what a thread allocates while its pool is open comes from the
// pool and returns to it when freed, also after the pool was closed; outside allocations never get
// its blocks, and empty_cache() leaves them; release_pool() hands them to the general cache.
BOOST_AUTO_TEST_CASE(a_private_pool_keeps_its_blocks_to_itself) {
  CountingAllocator raw;
  CachingAllocator cache(raw, size_t(64) << 20, /*min_cached=*/0);
  const size_t n = size_t(1) << 20;
  CachingAllocator::PoolId pool = cache.create_pool();
  void *a = nullptr, *b = nullptr, *out = nullptr;
  {
    PoolScope in(cache, pool);
    a = cache.allocate(n);
    cache.release(a, n);  // an intermediate, freed inside the capture
    b = cache.allocate(n);
    BOOST_TEST(b == a);  // reused inside the pool
    out = cache.allocate(2 * n);  // an output that outlives the capture
    cache.release(b, n);
  }
  BOOST_TEST(raw.allocations == 2);
  BOOST_TEST(cache.pool_reserved(pool) == 3 * n);
  void* outside = cache.allocate(n);  // the pool's cached block is not handed out
  BOOST_TEST(outside != a);
  BOOST_TEST(raw.allocations == 3);
  cache.release(outside, n);
  cache.empty_cache();  // gives back the general cache only
  BOOST_TEST(raw.releases == 1);
  BOOST_TEST(cache.pool_reserved(pool) == 3 * n);
  cache.release(out, 2 * n);  // freed after the capture: back to the pool
  {
    PoolScope in(cache, pool);
    BOOST_TEST(cache.allocate(2 * n) == out);
    cache.release(out, 2 * n);
  }
  BOOST_TEST(cache.stats().allocated == 0u);
  BOOST_TEST(cache.stats().reserved == 3 * n);
  cache.release_pool(pool);
  BOOST_TEST(cache.allocate(n) == a);  // now the general cache's
  check_error([&] { cache.begin_pool(pool); }, {"pool", "released"});
  check_error([&] { cache.release_pool(12345); }, {"pool 12345", "does not exist"});
}

// A pool released while one of its blocks is live: the block joins the general cache when freed.
// Another thread's allocations while a pool is open are not the pool's.
BOOST_AUTO_TEST_CASE(a_released_pools_live_blocks_and_other_threads) {
  CountingAllocator raw;
  CachingAllocator cache(raw, size_t(64) << 20, /*min_cached=*/0);
  const size_t n = size_t(1) << 16;
  CachingAllocator::PoolId pool = cache.create_pool();
  void* live = nullptr;
  void* other = nullptr;
  {
    PoolScope in(cache, pool);
    live = cache.allocate(n);
    std::thread t([&] { other = cache.allocate(n); });
    t.join();
    check_error([&] { PoolScope again(cache, pool); }, {"already has pool", "one at a time"});
  }
  BOOST_TEST(cache.pool_reserved(pool) == n);  // the other thread's block is not in it
  cache.release(other, n);
  cache.release_pool(pool);
  cache.release(live, n);
  BOOST_TEST(cache.stats().allocated == 0u);
  BOOST_TEST(cache.stats().reserved == 2 * n);  // both in the general cache
  void* x = cache.allocate(n);
  void* y = cache.allocate(n);
  BOOST_TEST(((x == live && y == other) || (x == other && y == live)));
  BOOST_TEST(raw.allocations == 2);
  cache.release(x, n);
  cache.release(y, n);
}
