#include "dsl/custom_op.h"

#include <cctype>
#include <deque>
#include <mutex>

#include "dsl/cuda/cuda_context.h"
#include "dsl/dispatch.h"
#include "dsl/eager/runners.h"
#include "dsl/error.h"

namespace kiln {

namespace {

// The registrations, each at its address for the life of the process (OpDef::custom points here).
struct Registrations {
  std::mutex mu;
  std::deque<CustomOp> ops;
};
Registrations& registrations() {
  static Registrations r;
  return r;
}

bool identifier(std::string_view s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  return true;
}

// Runs `f`, turning an exception other than kiln::Error into one that names the op and `what`.
template <typename F>
auto named(const std::string& op, const char* what, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw_error(op, ": its ", what, " threw: ", e.what());
  }
}

}  // namespace

const OpDef& register_op(CustomOp op) {
  size_t sep = op.name.find("::");
  KILN_CHECK(sep != std::string::npos && identifier(std::string_view(op.name).substr(0, sep)) &&
                 identifier(std::string_view(op.name).substr(sep + 2)),
             "register_op: '", op.name, "' is not a custom op name: write \"namespace::op\" (letters, digits and '_')");
  KILN_CHECK(op.num_inputs >= 1, "register_op: ", op.name, " takes ", op.num_inputs,
             " inputs; a custom op takes at least 1 (its inputs' device picks its kernel)");
  KILN_CHECK(bool(op.shape), "register_op: ", op.name, " has no shape rule (CustomOp::shape)");
  KILN_CHECK(op.has_cpu_kernel() || op.has_cuda_kernel(), "register_op: ", op.name,
             " has no kernel (CustomOp::cpu, cuda, raw_cpu or raw_cuda)");
  KILN_CHECK(!(op.cpu && op.raw_cpu) && !(op.cuda && op.raw_cuda), "register_op: ", op.name,
             " has two kernels for one device (a CustomKernel and a RawKernel); give one");
  KILN_CHECK(op.differentiable || !op.backward, "register_op: ", op.name,
             " is marked non-differentiable but has a derivative rule");
  KILN_CHECK(!(op.pointwise && op.define), "register_op: ", op.name,
             " has two definitions (a Halide expression, pointwise, and one over tensors, define); give one");
  KILN_CHECK(!find_op_def(op.name), "register_op: op '", op.name, "' is already registered");
  if (op.differentiable && !op.backward)  // recorded on the tape all the same: the error comes with backward()
    op.backward = [name = op.name](const TensorList&, const TensorList&, const TensorList&, const Attrs&,
                                   const std::vector<bool>&) -> TensorList {
      throw_error("backward: a gradient was asked of ", name, ", which has no derivative rule; give it one ",
                  "(CustomOp::backward) or mark it non-differentiable (CustomOp::differentiable = false)");
    };
  Registrations& r = registrations();
  const CustomOp* stored;
  {
    std::lock_guard<std::mutex> lock(r.mu);
    stored = &r.ops.emplace_back(std::move(op));
  }
  OpDef def;
  def.name = stored->name;
  def.schedule_class = stored->pointwise ? ScheduleClass::pointwise : ScheduleClass::custom;
  def.family = KernelFamily::custom;
  def.pointwise = stored->pointwise;
  def.define = stored->define;
  def.num_inputs = stored->num_inputs;
  def.differentiable = stored->differentiable;
  def.collective = stored->collective;
  def.custom = stored;
  def.infer = [stored](const std::vector<TensorMeta>& in, const Attrs& a) {
    std::vector<TensorMeta> out = named(stored->name, "shape rule", [&] { return stored->shape(in, a); });
    KILN_CHECK(!out.empty(), stored->name, ": its shape rule gave no outputs");
    return out;
  };
  return add_op_def(std::move(def));
}

void* cuda_stream(int device) { return cuda_context(device).stream; }

TensorList call_op(const OpDef& op, const TensorList& inputs, const Attrs& attrs) {
  return dispatch(op, inputs, attrs);
}

TensorList call_op(std::string_view name, const TensorList& inputs, const Attrs& attrs) {
  return dispatch(op_def(name), inputs, attrs);
}

namespace {

StridedBuffer buffer_of(const Tensor& t) {
  return {t.data_ptr(), t.dtype(), t.shape(), t.impl().strides, t.device()};
}

// A RawKernel run as a CustomKernel: outputs allocated from the shape rule, inputs as they are.
TensorList run_raw(const RawKernel& kernel, const TensorList& in, const std::vector<TensorMeta>& expected,
                   const Attrs& attrs) {
  std::vector<StridedBuffer> ins, outs;
  TensorList out;
  for (const Tensor& t : in) ins.push_back(buffer_of(t));
  for (const TensorMeta& m : expected) {
    out.push_back(Tensor::empty(m.shape, {m.dtype, m.device}));
    outs.push_back(buffer_of(out.back()));
  }
  kernel(ins, outs, attrs);
  return out;
}

}  // namespace

// The eager runner of KernelFamily::custom: the kernel of the inputs' device outside autograd, on
// contiguous inputs (a RawKernel gets them as they are), its outputs checked against the shape rule.
TensorList run_custom(const OpDef& def, const TensorList& inputs, const Attrs& attrs) {
  const CustomOp& op = *def.custom;
  const bool cuda = inputs[0].device().is_cuda();
  const CustomKernel& kernel = cuda ? op.cuda : op.cpu;
  const RawKernel& raw = cuda ? op.raw_cuda : op.raw_cpu;
  KILN_CHECK(kernel || raw, op.name, ": no ", cuda ? "CUDA" : "CPU", " kernel is registered (it has a ",
             cuda ? "CPU" : "CUDA", " one); move its inputs with to(Device::", cuda ? "cpu()" : "cuda()", ")");
  std::vector<TensorMeta> expected = def.infer(metas_of(inputs), attrs);
  TensorList in;
  for (const Tensor& t : inputs) in.push_back(raw ? t.detach() : t.contiguous().detach());
  const char* which = cuda ? "CUDA kernel" : "CPU kernel";
  TensorList out = named(op.name, which, [&] { return raw ? run_raw(raw, in, expected, attrs) : kernel(in, attrs); });
  KILN_CHECK(out.size() == expected.size(), op.name, ": its ", which, " returned ", out.size(),
             " outputs, but its shape rule says ", expected.size());
  for (size_t i = 0; i < out.size(); ++i) {
    KILN_CHECK(out[i].defined(), op.name, ": its ", which, " returned an undefined tensor as output ", i);
    TensorMeta got = metas_of({out[i]})[0];
    KILN_CHECK(got == expected[i], op.name, ": its ", which, " returned output ", i, " as ", to_string(got),
               ", but its shape rule says ", to_string(expected[i]));
    for (size_t k = 0; k < in.size(); ++k)
      KILN_CHECK(out[i].storage() != in[k].storage(), op.name, ": its ", which, " returned input ", k,
                 " (or a view of it) as output ", i, "; a custom op returns new tensors (clone() it)");
  }
  return out;
}

}  // namespace kiln
