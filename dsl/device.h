// Where a tensor's storage lives: the CPU, or CUDA device i (dsl/cuda/: kiln::Error when a tensor
// is made on a CUDA device that this machine lacks).
#pragma once
#include <iosfwd>
#include <cstdint>
#include <string>
#include <string_view>

namespace kiln {

enum class DeviceType : uint8_t { cpu, cuda };

struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;

  static constexpr Device cpu() { return {DeviceType::cpu, 0}; }
  static constexpr Device cuda(int index = 0) { return {DeviceType::cuda, index}; }
  bool is_cpu() const { return type == DeviceType::cpu; }
  bool is_cuda() const { return type == DeviceType::cuda; }
  bool operator==(const Device&) const = default;
  std::string str() const;  // "cpu", "cuda:0"
};

std::ostream& operator<<(std::ostream& os, const Device& d);
Device device_from_name(std::string_view name);  // "cpu", "cuda", "cuda:1"; kiln::Error otherwise

}  // namespace kiln
