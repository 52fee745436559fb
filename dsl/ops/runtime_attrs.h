// Numeric attributes that an eager kernel takes at run time (layer_norm's eps, var's correction).
// A Halide definition reads a numeric attribute with attr_expr(): normally a constant from the
// attrs, but while a generator holds a RuntimeAttr binding for that name, the Expr of the kernel's
// scalar input instead, so one eager kernel serves every value. A JIT region that bakes the value
// in calls the same definition with no binding.
//
//   Halide::Expr eps = attr_expr(a, "eps");  // in a definition
//   RuntimeAttr bind("eps", *eps_input);     // in a generator, around define()
#pragma once
#include <Halide.h>

#include <string>

#include "dsl/attrs.h"

namespace kiln {

// The attribute as an Expr: a bound run-time value, else the int64 or double in `a`.
Halide::Expr attr_expr(const Attrs& a, const std::string& name);

class RuntimeAttr {
 public:
  RuntimeAttr(std::string name, Halide::Expr value);
  ~RuntimeAttr();
  RuntimeAttr(const RuntimeAttr&) = delete;
  RuntimeAttr& operator=(const RuntimeAttr&) = delete;

 private:
  std::string name_;
};

}  // namespace kiln
