#include "generators/kernel_params.h"

#include <sstream>

namespace kiln {

Attrs parse_kernel_attrs(const std::string& text) {
  Attrs a;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ';')) {
    if (item.empty()) continue;
    auto eq = item.find(':');
    KILN_CHECK(eq != std::string::npos, "kernel attrs: expected key:value, got '", item, "'");
    a.set(item.substr(0, eq), item.substr(eq + 1));
  }
  return a;
}

}  // namespace kiln
