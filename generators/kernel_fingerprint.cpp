#include "generators/kernel_fingerprint.h"

#include <cstring>
#include <map>
#include <sstream>
#include <string_view>

#include "dsl/fnv_hash.h"

namespace kiln {
namespace {

using namespace Halide;
using namespace Halide::Internal;

// Halide's IR printer, made exact: float constants as their bits (the printer rounds them), the
// type of every call and variable, and the parameters and constant buffers the IR reads.
class ExactPrinter : public IRPrinter {
 public:
  explicit ExactPrinter(std::ostream& os) : IRPrinter(os) {}

  void expr(const Expr& e) {
    if (e.defined()) {
      print(e);
    } else {
      stream << "<none>";
    }
  }

  std::map<std::string, Parameter> parameters;
  std::map<std::string, Buffer<>> buffers;

 protected:
  using IRPrinter::visit;

  void visit(const FloatImm* op) override {
    uint64_t bits = 0;
    std::memcpy(&bits, &op->value, sizeof bits);
    stream << "float" << op->type.bits() << "{" << std::hex << bits << std::dec << "}";
  }
  void visit(const Variable* op) override {
    stream << op->name << "{" << op->type << "}";
    if (op->param.defined()) parameters[op->param.name()] = op->param;
    if (op->image.defined()) buffers[op->image.name()] = op->image;
  }
  void visit(const Call* op) override {
    stream << "{" << op->type << " " << int(op->call_type) << "}";
    IRPrinter::visit(op);
    if (op->param.defined()) parameters[op->param.name()] = op->param;
    if (op->image.defined()) buffers[op->image.name()] = op->image;
  }
};

void describe_level(std::ostream& os, LoopLevel level) {
  // A wrapper's levels are locked only when lowering (a pipeline's own Funcs are by now); the
  // description runs in a process of its own, so locking them here changes nothing generated.
  level.lock();
  if (!level.defined()) {
    os << "<undefined>";
  } else if (level.is_inlined()) {
    os << "inlined";
  } else if (level.is_root()) {
    os << "root";
  } else {
    os << level.to_string() << (level.var().is_rvar ? "(rvar)" : "");
  }
}

void describe_stage(ExactPrinter& p, std::ostream& os, const StageSchedule& s) {
  for (const ReductionVariable& r : s.rvars()) {
    os << "    rvar " << r.var << " ";
    p.expr(r.min);
    os << " ";
    p.expr(r.extent);
    os << "\n";
  }
  for (const Split& split : s.splits()) {
    os << "    split " << int(split.split_type) << " " << split.old_var << " " << split.outer << " " << split.inner
       << " exact=" << split.exact << " tail=" << split.tail << " factor=";
    p.expr(split.factor);
    os << "\n";
  }
  for (const Dim& d : s.dims())
    os << "    dim " << d.var << " for_type=" << int(d.for_type) << " device=" << int(d.device_api)
       << " dim_type=" << int(d.dim_type) << "\n";
  for (const PrefetchDirective& f : s.prefetches()) {
    os << "    prefetch " << f.name << " at " << f.at << " from " << f.from << " " << int(f.strategy) << " ";
    p.expr(f.offset);
    os << "\n";
    if (f.param.defined()) p.parameters[f.param.name()] = f.param;
  }
  os << "    fuse_level ";
  describe_level(os, s.fuse_level().level);
  for (const auto& [var, align] : s.fuse_level().align) os << " " << var << ":" << int(align);
  os << "\n";
  for (const FusedPair& f : s.fused_pairs())
    os << "    fused " << f.func_1 << "." << f.stage_1 << " " << f.func_2 << "." << f.stage_2 << " " << f.var_name << "\n";
  os << "    race=" << s.allow_race_conditions() << " atomic=" << s.atomic()
     << " override_associativity=" << s.override_atomic_associativity_test() << "\n";
}

void describe_definition(ExactPrinter& p, std::ostream& os, const Definition& d, const std::string& indent) {
  os << indent << "args";
  for (const Expr& a : d.args()) {
    os << " ";
    p.expr(a);
  }
  os << "\n" << indent << "values";
  for (const Expr& v : d.values()) {
    os << " ";
    p.expr(v);
  }
  os << "\n" << indent << "predicate ";
  p.expr(d.predicate());
  os << "\n";
  describe_stage(p, os, d.schedule());
  for (const Specialization& s : d.specializations()) {
    os << indent << "specialize ";
    p.expr(s.condition);
    os << " failure=" << s.failure_message << "\n";
    if (s.definition.defined()) describe_definition(p, os, s.definition, indent + "  ");
  }
}

void describe_function(ExactPrinter& p, std::ostream& os, const Function& f) {
  os << "func " << f.name() << "(";
  for (const std::string& a : f.args()) os << a << ",";
  os << ") ->";
  for (const Type& t : f.output_types()) os << " " << t;
  os << "\n";
  const FuncSchedule& s = f.schedule();
  os << "  store ";
  describe_level(os, s.store_level());
  os << " compute ";
  describe_level(os, s.compute_level());
  os << " memory " << s.memory_type() << " memoized=" << s.memoized() << " async=" << s.async() << "\n";
  for (const StorageDim& d : s.storage_dims()) {
    os << "  storage " << d.var << " fold_forward=" << d.fold_forward << " ";
    p.expr(d.alignment);
    os << " ";
    p.expr(d.bound);
    os << " ";
    p.expr(d.fold_factor);
    os << "\n";
  }
  for (const Bound& b : s.bounds()) {
    os << "  bound " << b.var << " ";
    for (const Expr& e : {b.min, b.extent, b.modulus, b.remainder}) {
      p.expr(e);
      os << " ";
    }
    os << "\n";
  }
  // A wrapper (f.in(g)) replaces the calls only when lowering, so no definition calls it: it is
  // described here, schedule included.
  for (const auto& [name, wrapper] : s.wrappers()) {
    os << "  wrapper for " << name << ":\n";
    describe_function(p, os, Function(wrapper));
  }
  if (f.has_extern_definition()) {
    os << "  extern " << f.extern_function_name() << " mangling=" << int(f.extern_definition_name_mangling())
       << " device=" << int(f.extern_function_device_api());
    for (const ExternFuncArgument& a : f.extern_arguments()) {
      os << " arg" << int(a.arg_type) << ":";
      if (a.is_func()) os << Function(a.func).name();
      if (a.is_expr()) p.expr(a.expr);
      if (a.is_buffer()) {
        os << a.buffer.name();
        p.buffers[a.buffer.name()] = a.buffer;
      }
      if (a.is_image_param()) {
        os << a.image_param.name();
        p.parameters[a.image_param.name()] = a.image_param;
      }
    }
    os << "\n";
  }
  if (f.has_pure_definition()) describe_definition(p, os, f.definition(), "  ");
  for (const Definition& u : f.updates()) {
    os << "  update\n";
    describe_definition(p, os, u, "  ");
  }
  for (const Parameter& out : f.output_buffers()) p.parameters[out.name()] = out;
  os << "  trace " << f.is_tracing_loads() << f.is_tracing_stores() << f.is_tracing_realizations() << "\n";
}

// Parameters are described after the functions; describing one may find more (a constraint that
// reads another buffer's extent), so this repeats until none is new.
void describe_parameters(ExactPrinter& p, std::ostream& os) {
  std::map<std::string, bool> done;
  for (bool more = true; more;) {
    more = false;
    auto params = p.parameters;  // describing may add to p.parameters
    for (const auto& [name, param] : params) {
      if (done[name]) continue;
      done[name] = more = true;
      os << "param " << name << " " << param.type() << " dims=" << param.dimensions() << " buffer=" << param.is_buffer();
      if (param.is_buffer()) {
        os << " align=" << param.host_alignment() << " memory=" << param.memory_type() << "\n";
        for (int d = 0; d < param.dimensions(); ++d) {
          os << "  dim" << d << " ";
          for (const Expr& e : {param.min_constraint(d), param.extent_constraint(d), param.stride_constraint(d)}) {
            p.expr(e);
            os << " ";
          }
          os << "\n";
        }
      } else {
        os << " range ";
        p.expr(param.min_value());
        os << " ";
        p.expr(param.max_value());
        os << "\n";
      }
    }
  }
  for (const auto& [name, buffer] : p.buffers) {
    // FNV-1a of the contents of a constant buffer (a table the definition reads).
    const char* bytes = static_cast<const char*>(buffer.data());
    uint64_t hash = bytes ? fnv1a(std::string_view(bytes, buffer.size_in_bytes())) : kFnvOffset;
    os << "buffer " << name << " " << buffer.type() << " dims=" << buffer.dimensions() << " bytes=" << buffer.size_in_bytes()
       << " fnv=" << std::hex << hash << std::dec << "\n";
  }
}

}  // namespace

std::string pipeline_fingerprint(const Pipeline& pipeline) {
  std::map<std::string, Function> functions;
  for (const Func& out : pipeline.outputs()) {
    functions.emplace(out.name(), out.function());
    for (const auto& [name, f] : find_transitive_calls(out.function())) functions.emplace(name, f);
  }
  std::ostringstream os;
  ExactPrinter printer(os);
  for (const Func& out : pipeline.outputs()) os << "output " << out.name() << "\n";
  // Loop levels can be read once locked, as lowering locks them (this process ends after).
  for (auto& [name, f] : functions) f.lock_loop_levels();
  for (const auto& [name, f] : functions) describe_function(printer, os, f);
  describe_parameters(printer, os);
  return os.str();
}

}  // namespace kiln
