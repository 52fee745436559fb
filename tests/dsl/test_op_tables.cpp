// The op tables are compiled twice (dsl/ops/op_tables.h): into kiln_defs with their Halide
// definitions and into kiln_defs_runtime (kiln::runtime) with stubs in their place. Both builds
// must hold the same ops in the same order with the same properties and shape rules; a program
// that links kiln_defs (this one) must get the Halide tables from the registry; a stub must raise
// kiln::Error naming kiln::runtime rather than crash.
#include <Halide.h>

#include "dsl/halide_def.h"
#include "dsl/op_def.h"
#include "support/reference.h"

namespace kiln::halide_tables {
void add_all_ops(std::vector<OpDef>& defs);
}
namespace kiln::runtime_tables {
void add_all_ops(std::vector<OpDef>& defs);
}

using namespace kiln;

namespace {

std::vector<OpDef> tables(void (*add)(std::vector<OpDef>&)) {
  std::vector<OpDef> defs;
  add(defs);
  return defs;
}

const OpDef& find(const std::vector<OpDef>& defs, const std::string& name) {
  for (const OpDef& d : defs)
    if (d.name == name) return d;
  throw std::runtime_error("no op " + name);
}

}  // namespace

BOOST_AUTO_TEST_CASE(both_builds_of_the_tables_hold_the_same_ops) {
  std::vector<OpDef> full = tables(&halide_tables::add_all_ops), run = tables(&runtime_tables::add_all_ops);
  BOOST_TEST_REQUIRE(full.size() == run.size());
  BOOST_TEST(full.size() == all_op_defs().size());
  for (size_t i = 0; i < full.size(); ++i) {
    const OpDef &a = full[i], &b = run[i];
    BOOST_TEST_CONTEXT(a.name) {
      BOOST_TEST(a.name == b.name);
      BOOST_TEST((a.schedule_class == b.schedule_class && a.family == b.family && a.num_inputs == b.num_inputs));
      BOOST_TEST((a.random == b.random && a.differentiable == b.differentiable && a.comparison == b.comparison &&
                  a.cheap == b.cheap && a.gemm == b.gemm && a.host_checked == b.host_checked &&
                  a.compares_with_own_reduction == b.compares_with_own_reduction));
      BOOST_TEST((a.autocast == b.autocast && a.condition_input == b.condition_input && a.view.reshape == b.view.reshape));
      // The stubs stand exactly where the Halide parts are: graph passes that ask whether an op
      // is pointwise, or has a definition, get the same answer under kiln::runtime.
      BOOST_TEST(bool(a.pointwise) == bool(b.pointwise));
      BOOST_TEST(bool(a.define) == bool(b.define));
      BOOST_TEST(bool(a.view.index) == bool(b.view.index));
      BOOST_TEST(bool(a.infer) == bool(b.infer));
      BOOST_TEST(&op_def(a.name) != &a);  // the registry's own copy
    }
  }
}

BOOST_AUTO_TEST_CASE(both_builds_give_the_same_shapes_and_dtypes) {
  std::vector<OpDef> full = tables(&halide_tables::add_all_ops), run = tables(&runtime_tables::add_all_ops);
  struct Case {
    std::string op;
    std::vector<TensorMeta> in;
    Attrs attrs;
  };
  Device cpu = Device::cpu();
  std::vector<Case> cases = {
      {"add", {{{4, 1, 3}, DType::f16, cpu}, {{5, 3}, DType::f32, cpu}}, {}},
      {"lt", {{{7}, DType::i32, cpu}, {{}, DType::f64, cpu}}, {}},
      {"matmul", {{{2, 8, 16}, DType::f32, cpu}, {{16, 4}, DType::f32, cpu}}, {}},
      {"sum", {{{3, 5, 7}, DType::i64, cpu}}, {{"dims", std::vector<int64_t>{1}}, {"keepdim", true}}},
      {"view", {{{6, 4}, DType::f32, cpu}}, {{"shape", std::vector<int64_t>{3, -1}}}},
      {"arange", {}, {{"start", 1.0}, {"end", 10.0}, {"step", 2.0}, {"dtype", std::string("f32")}}},
  };
  for (const Case& c : cases) {
    BOOST_TEST_CONTEXT(c.op) {
      std::vector<TensorMeta> a = find(full, c.op).infer(c.in, c.attrs), b = find(run, c.op).infer(c.in, c.attrs);
      BOOST_TEST_REQUIRE(a.size() == b.size());
      for (size_t i = 0; i < a.size(); ++i) BOOST_TEST((a[i].shape == b[i].shape && a[i].dtype == b[i].dtype));
    }
  }
  // A bad input is the same error in both.
  std::vector<TensorMeta> bad = {{{4, 3}, DType::f32, cpu}, {{5, 3}, DType::f32, cpu}};
  BOOST_CHECK_THROW(find(full, "add").infer(bad, {}), Error);
  BOOST_CHECK_THROW(find(run, "add").infer(bad, {}), Error);
}

BOOST_AUTO_TEST_CASE(the_registry_has_the_halide_definitions_and_the_stubs_raise_errors) {
  Halide::Var x("x"), y("y");
  std::vector<Halide::Expr> in = {Halide::Expr(x) + 1, Halide::Expr(y)};
  Halide::Expr sum = op_def("add").pointwise(in, {});
  BOOST_TEST(sum.defined());
  BOOST_TEST(sum.type() == Halide::Int(32));
  std::vector<OpDef> run = tables(&runtime_tables::add_all_ops);
  try {
    find(run, "add").pointwise(in, {});
    BOOST_ERROR("the runtime table's add computed a Halide Expr");
  } catch (const Error& e) {
    BOOST_TEST(std::string(e.what()).find("kiln::runtime") != std::string::npos, e.what());
  }
  BOOST_CHECK_THROW(find(run, "softmax").define({}, {{"dim", int64_t(-1)}}), Error);
  BOOST_CHECK_THROW(find(run, "transpose").view.index({}, {}, {}), Error);
}
