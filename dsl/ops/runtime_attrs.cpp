#include "dsl/ops/runtime_attrs.h"

#include <map>

namespace kiln {

namespace {
thread_local std::map<std::string, Halide::Expr> bound;
}  // namespace

Halide::Expr attr_expr(const Attrs& a, const std::string& name) {
  auto it = bound.find(name);
  if (it != bound.end()) return it->second;
  for (const auto& [k, v] : a.items()) {
    if (k != name) continue;
    if (const int64_t* i = std::get_if<int64_t>(&v)) return Halide::Expr(*i);
    if (const double* d = std::get_if<double>(&v)) return Halide::Expr(*d);
    throw_error("attrs: attribute '", name, "' is not a number");
  }
  throw_error("attrs: missing attribute '", name, "'");
}

RuntimeAttr::RuntimeAttr(std::string name, Halide::Expr value) : name_(std::move(name)) {
  bound[name_] = std::move(value);
}

RuntimeAttr::~RuntimeAttr() { bound.erase(name_); }

}  // namespace kiln
