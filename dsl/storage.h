// Storage: one allocation that tensors (and the views of them) share, with the version counter
// that autograd uses to detect in-place changes of saved tensors. Allocators are per device.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "dsl/device.h"

namespace kiln {

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(size_t nbytes) = 0;
  virtual void release(void* ptr, size_t nbytes) = 0;
};

// 64-byte aligned host memory, straight from the system.
Allocator& cpu_allocator();
// The allocator tensors on a device use (caching: caching_allocator.h, cuda/cuda_allocator.h);
// throws kiln::Error for a device this machine lacks.
Allocator& allocator_for(Device d);

struct Storage {
  void* data = nullptr;
  size_t nbytes = 0;
  Device device;
  Allocator* allocator = nullptr;  // null: memory owned elsewhere
  // Where this Storage is a second handle on another's memory (allocator null): that one, kept
  // alive while this lives. Tensors over each can then be told apart by their storage.
  std::shared_ptr<const Storage> base;
  std::atomic<uint64_t> version{0};
  // After an in-place write (copy_, a fused optimizer step): autograd's saved-tensor checks and
  // the compiled graphs' packed weights see a new version.
  void written() { ++version; }

  Storage(void* data, size_t nbytes, Device device, Allocator* allocator)
      : data(data), nbytes(nbytes), device(device), allocator(allocator) {}
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  ~Storage();

  static std::shared_ptr<Storage> allocate(size_t nbytes, Device device);
};

}  // namespace kiln
