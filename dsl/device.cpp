#include "dsl/device.h"

#include "dsl/error.h"

#include <ostream>

namespace kiln {

std::string Device::str() const {
  return is_cpu() ? std::string("cpu") : "cuda:" + std::to_string(index);
}

std::ostream& operator<<(std::ostream& os, const Device& d) { return os << d.str(); }

Device device_from_name(std::string_view n) {
  if (n == "cpu") return Device::cpu();
  if (n == "cuda") return Device::cuda();
  if (n.starts_with("cuda:") && n.size() > 5 && n.find_first_not_of("0123456789", 5) == std::string_view::npos)
    return Device::cuda(std::stoi(std::string(n.substr(5))));
  throw_error("device: unknown name '", n, "' (expected cpu, cuda or cuda:N)");
}

}  // namespace kiln
