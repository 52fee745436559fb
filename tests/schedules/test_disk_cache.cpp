// The disk cache of compiled code: entries round-trip; truncated or altered entries are detected,
// removed and rebuilt, never loaded; a compiled graph is loaded from the cache by a second
// compile; KILN_CACHE=0 writes nothing; threads compiling one graph at once leave one valid entry.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "schedules/disk_cache.h"
#include "support/reference.h"

using namespace kiln;
using namespace kiln::test;
namespace fs = std::filesystem;

namespace {

// A fresh, empty cache folder for one test; the previous settings come back at the end.
struct FreshCache {
  std::string dir;
  explicit FreshCache(const std::string& name) {
    dir = (fs::temp_directory_path() / ("kiln-test-cache-" + name + "-" + std::to_string(::getpid()))).string();
    fs::remove_all(dir);
    set_disk_cache_dir(dir);
  }
  ~FreshCache() {
    set_disk_cache_enabled(true);
    fs::remove_all(dir);
  }
  std::vector<fs::path> entries() const {
    std::vector<fs::path> out;
    if (fs::exists(dir + "/halide"))
      for (const auto& e : fs::directory_iterator(dir + "/halide")) out.push_back(e.path());
    return out;
  }
};

// y[i, j] = exp(x[i, j]) * 2 - sum_j x[i, j], in double.
std::vector<double> reference(const Tensor& x) {
  std::vector<double> v = host_values(x), out(v.size());
  int64_t rows = x.size(0), cols = x.size(1);
  for (int64_t i = 0; i < rows; ++i) {
    double s = 0;
    for (int64_t j = 0; j < cols; ++j) s += v[size_t(i * cols + j)];
    for (int64_t j = 0; j < cols; ++j) out[size_t(i * cols + j)] = std::exp(v[size_t(i * cols + j)]) * 2 - s;
  }
  return out;
}

Tensor model(const Tensor& x) { return exp(x) * 2.0 - x.sum({1}, true); }

void check_compiled(uint64_t seed) {
  auto f = compile(model, {.backend = "halide"});
  Tensor x = random_tensor({24, 40}, f32, seed);
  check_close(f(x), reference(x), {24, 40}, "compiled from the cache, seed " + std::to_string(seed));
}

void write_bytes(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary) << bytes;
}

std::string read_bytes(const fs::path& p) { return file_bytes(p.string()); }

}  // namespace

BOOST_AUTO_TEST_CASE(entries_round_trip_and_damage_is_detected) {
  FreshCache cache("entries");
  std::mt19937_64 rng(7);
  std::string payload(10000, '\0');
  for (char& c : payload) c = char(rng());
  fs::path src = fs::temp_directory_path() / ("kiln-test-payload-" + std::to_string(::getpid()));
  write_bytes(src, payload);
  std::string key = cache_key({"a test entry", std::to_string(rng())});
  BOOST_TEST(key.size() == 32u);
  BOOST_TEST(cache_key({"a"}) != cache_key({"b"}));

  BOOST_TEST(find_cache_entry(key, ".bin").empty());
  std::string path = store_cache_entry(key, ".bin", src.string());
  BOOST_TEST(find_cache_entry(key, ".bin") == path);
  BOOST_TEST(read_bytes(path).substr(0, payload.size()) == payload);

  DiskCacheStats before = disk_cache_stats();
  std::string whole = read_bytes(path);
  write_bytes(path, whole.substr(0, whole.size() - 5));  // truncated
  BOOST_TEST(find_cache_entry(key, ".bin").empty());
  BOOST_TEST(!fs::exists(path));  // removed, so it is rebuilt
  store_cache_entry(key, ".bin", src.string());
  whole[1234] = char(whole[1234] ^ 0x10);  // one flipped bit
  write_bytes(path, whole);
  BOOST_TEST(find_cache_entry(key, ".bin").empty());
  write_bytes(path, "");  // empty
  BOOST_TEST(find_cache_entry(key, ".bin").empty());
  BOOST_TEST(disk_cache_stats().corrupt - before.corrupt == 3);
  fs::remove(src);
}

BOOST_AUTO_TEST_CASE(the_least_recently_used_entries_go_past_the_size_limit) {
  FreshCache cache("evict");
  fs::path src = fs::temp_directory_path() / ("kiln-test-payload-" + std::to_string(::getpid()));
  write_bytes(src, std::string(400 << 10, 'x'));  // 400 KiB each, limit 1 MiB
  ::setenv("KILN_CACHE_MAX_MB", "1", 1);
  std::string a = store_cache_entry(cache_key({"a"}), ".bin", src.string());
  std::string b = store_cache_entry(cache_key({"b"}), ".bin", src.string());
  fs::last_write_time(a, fs::file_time_type::clock::now() - std::chrono::hours(2));
  fs::last_write_time(b, fs::file_time_type::clock::now() - std::chrono::hours(1));
  BOOST_TEST(!find_cache_entry(cache_key({"a"}), ".bin").empty());  // a hit: a is the most recent now
  std::string c = store_cache_entry(cache_key({"c"}), ".bin", src.string());  // 1.2 MiB: b goes
  ::unsetenv("KILN_CACHE_MAX_MB");
  BOOST_TEST(fs::exists(a));
  BOOST_TEST(!fs::exists(b));
  BOOST_TEST(fs::exists(c));
  fs::remove(src);
}

BOOST_AUTO_TEST_CASE(a_second_compile_loads_the_graph_from_the_cache) {
  FreshCache cache("reuse");
  DiskCacheStats s0 = disk_cache_stats();
  check_compiled(1);
  DiskCacheStats s1 = disk_cache_stats();
  BOOST_TEST(s1.writes - s0.writes >= 1);  // the graph (and the runtime, the first time in a process)
  size_t files = cache.entries().size();
  check_compiled(2);  // a new compiled function: same graph, same key
  DiskCacheStats s2 = disk_cache_stats();
  BOOST_TEST(s2.writes == s1.writes);
  BOOST_TEST(s2.hits - s1.hits >= 1);
  BOOST_TEST(cache.entries().size() == files);

  auto other = compile(model, {.backend = "halide"});  // another shape: another entry
  Tensor x = random_tensor({5, 3}, f32, 3);
  check_close(other(x), reference(x), {5, 3}, "other shape");
  BOOST_TEST(cache.entries().size() == files + 1);
}

BOOST_AUTO_TEST_CASE(a_corrupt_graph_entry_is_rebuilt_not_loaded) {
  FreshCache cache("corrupt");
  check_compiled(1);
  for (const fs::path& p : cache.entries()) {  // every entry cut in half
    std::string b = read_bytes(p);
    write_bytes(p, b.substr(0, b.size() / 2));
  }
  DiskCacheStats s0 = disk_cache_stats();
  check_compiled(2);
  DiskCacheStats s1 = disk_cache_stats();
  BOOST_TEST(s1.corrupt - s0.corrupt >= 1);
  BOOST_TEST(s1.writes - s0.writes >= 1);
  for (const fs::path& p : cache.entries()) {
    std::string key = p.stem().string();
    BOOST_TEST(find_cache_entry(key, ".so") == p.string(), "rebuilt entry " << p << " is valid");
  }
}

BOOST_AUTO_TEST_CASE(cache_off_writes_nothing) {
  FreshCache cache("off");
  set_disk_cache_enabled(false);
  BOOST_TEST(!disk_cache_enabled());
  check_compiled(4);
  BOOST_TEST(cache.entries().empty());
}

BOOST_AUTO_TEST_CASE(threads_compiling_one_graph_leave_one_valid_entry) {
  FreshCache cache("threads");
  check_compiled(1);  // the runtime is loaded once per process; this builds it if needed
  for (const fs::path& p : cache.entries()) fs::remove(p);
  std::vector<std::thread> threads;
  std::vector<std::string> errors(4);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([t, &errors] {
      try {
        auto f = compile(model, {.backend = "halide"});
        Tensor x = random_tensor({24, 40}, f32, uint64_t(10 + t));
        std::vector<double> got = host_values(f(x)), want = reference(x);
        for (size_t i = 0; i < want.size(); ++i)
          if (std::abs(got[i] - want[i]) > 1e-4 * (1 + std::abs(want[i]))) throw std::runtime_error("wrong value");
      } catch (const std::exception& e) {
        errors[size_t(t)] = e.what();
      }
    });
  for (auto& th : threads) th.join();
  for (const std::string& e : errors) BOOST_TEST(e.empty(), e);
  std::vector<fs::path> entries = cache.entries();
  BOOST_TEST(entries.size() == 1u);  // no temporary files left behind
  for (const fs::path& p : entries) BOOST_TEST(!find_cache_entry(p.stem().string(), ".so").empty());
}
