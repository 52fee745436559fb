// Device activity for the profiler (dsl/profiler.h): every kernel, copy and memset that runs on a
// CUDA device, with its device timestamps, from CUPTI's activity API. libcupti is loaded at run
// time (dlopen), as the driver and cuBLAS are, so kiln builds and runs without it; the record
// layouts come from CUPTI's header (the CUDA toolkit's), and a build without that header says so.
//
//   CuptiActivity a(origin);                    // records from here (one at a time)
//   bool pushed = cupti_push_launch_scope(7);   // what this thread launches now carries 7
//   launch();
//   if (pushed) cupti_pop_launch_scope();
//   cuda_synchronize();
//   std::vector<DeviceRecord> r = a.stop();
//
// bench/kernel_summary.cpp is the same API as an injection library for whole programs; the two do
// not record in one process (CUPTI takes one set of buffer callbacks).
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kiln {

struct DeviceRecord {
  std::string kind;  // "kernel", "memcpy" or "memset"
  std::string name;  // a kernel's (demangled) name; "memcpy HtoD", "memcpy DtoD", ...; "memset"
  double start_us = 0, duration_us = 0;  // on the host's steady clock, from the origin given
  int device = 0;
  uint32_t stream = 0;
  uint64_t launched_by = 0;  // the innermost launch scope open when it was launched (0: none)
  std::string args;          // members of a JSON object: grid, block, registers, bytes
};

// Why device activity cannot be recorded here ("" when it can): no CUDA device, no libcupti, or a
// build without CUPTI's header.
std::string cupti_unavailable_reason();

class CuptiActivity {
 public:
  // Starts recording; kiln::Error when cupti_unavailable_reason() is not empty or CUPTI refuses.
  explicit CuptiActivity(std::chrono::steady_clock::time_point origin);
  ~CuptiActivity();  // stops if still recording
  CuptiActivity(const CuptiActivity&) = delete;
  CuptiActivity& operator=(const CuptiActivity&) = delete;

  // Stops recording and returns what ran since the start, by start time. Call it after the
  // device finished the work (a synchronize); later activity is not recorded.
  std::vector<DeviceRecord> stop();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// Tags what the calling thread launches from now on with `id` (CUPTI's external correlation), the
// innermost push first, until the matching pop. Returns false, and does nothing, when no
// CuptiActivity records; pop only after a push that returned true.
bool cupti_push_launch_scope(uint64_t id);
void cupti_pop_launch_scope();

}  // namespace kiln
