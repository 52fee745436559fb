// Static attributes of an op node (dims, keepdim, eps, ...): named values that shape rules,
// Halide definitions and derivative rules read, and that graph capture will guard and hash.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "dsl/error.h"

namespace kiln {

using AttrValue = std::variant<int64_t, double, bool, std::string, std::vector<int64_t>>;

class Attrs {
 public:
  Attrs() = default;
  Attrs(std::initializer_list<std::pair<std::string, AttrValue>> items) : items_(items) {}

  Attrs& set(std::string name, AttrValue v);
  bool has(std::string_view name) const { return find(name) != nullptr; }

  template <typename T>
  const T& get(std::string_view name) const {
    const AttrValue* v = find(name);
    KILN_CHECK(v, "attrs: missing attribute '", name, "'");
    const T* t = std::get_if<T>(v);
    KILN_CHECK(t, "attrs: attribute '", name, "' has another type");
    return *t;
  }
  template <typename T>
  T get_or(std::string_view name, T fallback) const {
    const AttrValue* v = find(name);
    return v ? std::get<T>(*v) : fallback;
  }

  const std::vector<std::pair<std::string, AttrValue>>& items() const { return items_; }
  std::string str() const;  // "dims=[1], keepdim=false"

 private:
  const AttrValue* find(std::string_view name) const {
    for (const auto& [k, v] : items_)
      if (k == name) return &v;
    return nullptr;
  }
  std::vector<std::pair<std::string, AttrValue>> items_;
};

}  // namespace kiln
