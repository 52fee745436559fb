#include "dsl/attrs.h"

#include <sstream>

namespace kiln {

Attrs& Attrs::set(std::string name, AttrValue v) {
  for (auto& [k, old] : items_)
    if (k == name) {
      old = std::move(v);
      return *this;
    }
  items_.emplace_back(std::move(name), std::move(v));
  return *this;
}

std::string Attrs::str() const {
  std::ostringstream os;
  bool first = true;
  for (const auto& [k, v] : items_) {
    os << (first ? "" : ", ") << k << '=';
    first = false;
    std::visit(
        [&](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
            os << '[';
            for (size_t i = 0; i < x.size(); ++i) os << (i ? ", " : "") << x[i];
            os << ']';
          } else if constexpr (std::is_same_v<T, bool>) {
            os << (x ? "true" : "false");
          } else {
            os << x;
          }
        },
        v);
  }
  return os.str();
}

}  // namespace kiln
