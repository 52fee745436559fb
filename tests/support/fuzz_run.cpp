// Running and printing fuzz programs (support/fuzz_program.h): each step is written once, over
// Terms, so the C++ that program_to_cpp prints is exactly what run_program runs.
#include <cmath>
#include <cstdio>
#include <functional>
#include <regex>

#include "support/fuzz_program.h"
#include "support/op_db.h"
#include "support/reference.h"

namespace kiln::test {

namespace {

// ---- Running and printing: each step is written once, over Terms, so the C++ that
// program_to_cpp prints is exactly what run_program runs.

// A tensor (when running) and the C++ expression that computes it.
struct Term {
  Tensor t;
  std::string code;
  bool run = false;
};

std::string code_of(const Term& x) { return x.code; }
std::string code_of(int64_t v) { return std::to_string(v); }
std::string code_of(bool v) { return v ? "true" : "false"; }
std::string code_of(DType t) { return t == DType::bool_ ? "bool_" : std::string(name(t)); }
std::string code_of(const std::string& s) { return "\"" + s + "\""; }
std::string code_of(double v) {
  char buf[40];
  for (int digits = 6; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  std::string s = buf;
  return s.find_first_of(".e") == std::string::npos ? s + ".0" : s;
}
template <class T>
std::string code_of(const std::vector<T>& v) {
  std::string s = "{";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + code_of(v[i]);
  return s + "}";
}

bool running(const Term& x) { return x.run; }
bool running(const std::vector<Term>& v) { return !v.empty() && v[0].run; }
template <class T> bool running(const T&) { return false; }

const Tensor& value_of(const Term& x) { return x.t; }
TensorList value_of(const std::vector<Term>& v) {
  TensorList out;
  for (const Term& x : v) out.push_back(x.t);
  return out;
}
template <class T> const T& value_of(const T& v) { return v; }

template <class F, class... A>
Term call(const char* name, F f, const A&... a) {
  Term out;
  out.run = (running(a) || ...);
  std::string args;
  ((args += (args.empty() ? "" : ", ") + code_of(a)), ...);
  out.code = std::string(name) + "(" + args + ")";
  if (out.run) out.t = f(value_of(a)...);
  return out;
}

namespace terms {
#define KILN_FUZZ_TERM(fn)                                                                   \
  template <class... A>                                                                      \
  Term fn(const A&... a) {                                                                   \
    return call(#fn, [](const auto&... x) { return kiln::fn(x...); }, a...);                 \
  }
KILN_FUZZ_TERM(abs) KILN_FUZZ_TERM(tanh) KILN_FUZZ_TERM(sin)
KILN_FUZZ_TERM(add) KILN_FUZZ_TERM(sub) KILN_FUZZ_TERM(mul) KILN_FUZZ_TERM(div) KILN_FUZZ_TERM(maximum)
KILN_FUZZ_TERM(minimum) KILN_FUZZ_TERM(lt) KILN_FUZZ_TERM(le) KILN_FUZZ_TERM(gt) KILN_FUZZ_TERM(ge)
KILN_FUZZ_TERM(eq) KILN_FUZZ_TERM(ne) KILN_FUZZ_TERM(where)
KILN_FUZZ_TERM(sum) KILN_FUZZ_TERM(mean) KILN_FUZZ_TERM(max) KILN_FUZZ_TERM(min) KILN_FUZZ_TERM(var)
KILN_FUZZ_TERM(logsumexp) KILN_FUZZ_TERM(softmax) KILN_FUZZ_TERM(log_softmax) KILN_FUZZ_TERM(layer_norm)
KILN_FUZZ_TERM(matmul) KILN_FUZZ_TERM(transpose) KILN_FUZZ_TERM(permute) KILN_FUZZ_TERM(unsqueeze)
KILN_FUZZ_TERM(squeeze) KILN_FUZZ_TERM(slice) KILN_FUZZ_TERM(narrow) KILN_FUZZ_TERM(expand)
KILN_FUZZ_TERM(reshape) KILN_FUZZ_TERM(view) KILN_FUZZ_TERM(flatten) KILN_FUZZ_TERM(unflatten)
KILN_FUZZ_TERM(contiguous) KILN_FUZZ_TERM(cat) KILN_FUZZ_TERM(cast) KILN_FUZZ_TERM(rand_like)
#undef KILN_FUZZ_TERM

Term undefined(const Term& like) { return {Tensor(), "Tensor()", like.run}; }

// A deterministic operand built by creation ops inside the program (so compiled code records
// them): sin of an arithmetic sequence, values in [-1, 1].
Term constant(const Term& like, const Shape& shape, DType t, int64_t salt) {
  int64_t n = numel(shape);
  DType ct = t == DType::f64 ? t : DType::f32;
  double start = 0.5 + double(salt), end = start + 1.3 * double(n - 1);
  Term seq{Tensor(),
           "linspace(" + code_of(start) + ", " + code_of(end) + ", " + code_of(n) + ", {.dtype = " + code_of(ct) + "})",
           like.run};
  if (like.run) seq.t = kiln::linspace(start, end, n, {.dtype = ct, .device = like.t.device()});
  Term c = reshape(sin(seq), shape);
  return t == ct ? c : cast(c, t);
}

// An op of the unary database (support/op_db.h) on x, or on x / (|x| + 1) (in (-1, 1)) mapped
// onto the range where the op is smooth; the entry's code is the printed call. Not tanh(x): a
// transcendental step before each op doubled the chains of them, and a long chain of
// transcendental ops takes Halide 14 minutes to compile (schedules/README.md, "A known cost").
Term unary_op(const UnaryOpEntry& e, const Term& x) {
  Term in = x;
  if (!e.integers) {
    double half = (e.grad_hi - e.grad_lo) / 2, mid = (e.grad_hi + e.grad_lo) / 2;
    in = mul(div(x, add(abs(x), 1.0)), half);
    if (mid != 0) in = add(in, mid);
  }
  static const std::regex placeholder("\\bx\\b");
  Term out{Tensor(), std::regex_replace(e.code, placeholder, in.code), in.run};
  if (in.run) out.t = e.call(in.t);
  return out;
}

template <class Y>
Term compare(int64_t cmp, const Term& x, const Y& y) {
  switch (cmp) {
    case 0: return lt(x, y);
    case 1: return le(x, y);
    case 2: return gt(x, y);
    case 3: return ge(x, y);
    case 4: return eq(x, y);
    default: return ne(x, y);
  }
}

Term apply(const FuzzStep& s, const std::vector<Term>& v, int64_t index) {
  auto arg = [&](size_t i) -> const Term& { return v[size_t(s.args.at(i))]; };
  const Term& x = arg(0);
  const std::vector<int64_t>& n = s.ints;
  bool keepdim = s.variant & 1;
  switch (s.op) {
    case FuzzOp::unary: return unary_op(unary_op_db().at(size_t(s.variant)), x);
    case FuzzOp::add: return add(x, arg(1));
    case FuzzOp::sub: return sub(x, arg(1));
    case FuzzOp::mul: return mul(x, arg(1));
    case FuzzOp::div: return div(x, add(abs(arg(1)), 1.0));
    case FuzzOp::maximum: return maximum(x, arg(1));
    case FuzzOp::minimum: return minimum(x, arg(1));
    case FuzzOp::where: {
      size_t i = 1;
      Term cond = s.variant == 1 ? compare(n[0], x, s.scalar) : compare(n[0], x, arg(i++));
      const Term& c = arg(i++);
      return s.variant == 2 ? where(cond, c, s.scalar) : where(cond, c, arg(i));
    }
    case FuzzOp::scalar:
      switch (s.variant) {
        case 0: return mul(x, s.scalar);
        case 1: return add(x, s.scalar);
        case 2: return sub(s.scalar, x);
        default: return div(x, s.scalar);
      }
    case FuzzOp::sum: return sum(x, n, keepdim);
    case FuzzOp::mean: return mean(x, n, keepdim);
    case FuzzOp::max: return max(x, n, keepdim);
    case FuzzOp::min: return min(x, n, keepdim);
    case FuzzOp::var: return var(x, n, s.variant >> 1, keepdim);
    case FuzzOp::logsumexp: return logsumexp(x, n, keepdim);
    case FuzzOp::softmax: return softmax(x, n[0]);
    case FuzzOp::log_softmax: return log_softmax(x, n[0]);
    case FuzzOp::layer_norm: {
      Term w = s.variant & 1 ? add(mul(constant(x, s.shape, s.dtype, index), 0.5), 1.0) : undefined(x);
      Term b = s.variant & 2 ? mul(constant(x, s.shape, s.dtype, index + 1), 0.5) : undefined(x);
      Term ramp = mul(constant(x, s.shape, s.dtype, index + 2), 0.5);
      return layer_norm(add(tanh(x), ramp), s.shape, w, b, s.scalar);
    }
    case FuzzOp::matmul:
      if (s.variant == 0) return matmul(x, transpose(arg(1), int64_t(-2), int64_t(-1)));
      if (s.variant == 1) return matmul(x, constant(x, s.shape, s.dtype, index));
      return matmul(constant(x, s.shape, s.dtype, index), x);
    case FuzzOp::transpose: return transpose(x, n[0], n[1]);
    case FuzzOp::permute: return permute(x, n);
    case FuzzOp::unsqueeze: return unsqueeze(x, n[0]);
    case FuzzOp::squeeze: return n.empty() ? squeeze(x) : squeeze(x, n[0]);
    case FuzzOp::slice: return slice(x, n[0], n[1], n[2], n[3]);
    case FuzzOp::narrow: return narrow(x, n[0], n[1], n[2]);
    case FuzzOp::expand: return expand(x, n);
    case FuzzOp::reshape: return reshape(x, n);
    case FuzzOp::view: return view(x, n);
    case FuzzOp::flatten: return n.empty() ? flatten(x) : flatten(x, n[0], n[1]);
    case FuzzOp::unflatten: return unflatten(x, n[0], s.shape);
    case FuzzOp::contiguous: return contiguous(x);
    case FuzzOp::cat: {
      std::vector<Term> parts;
      for (size_t i = 0; i < s.args.size(); ++i) parts.push_back(arg(i));
      return cat(parts, n[0]);
    }
    case FuzzOp::cast: return cast(x, s.dtype);
    case FuzzOp::rand_like: return sub(rand_like(x, s.dtype), 0.5);
  }
  throw Error("fuzz program: unknown op");
}

}  // namespace terms

// Runs (when the inputs are real) and prints the steps; returns the outputs.
std::vector<Term> interpret(const FuzzProgram& p, std::vector<Term> v, std::string* cpp) {
  for (size_t i = 0; i < p.steps.size(); ++i) {
    Term t = terms::apply(p.steps[i], v, int64_t(i));
    std::string name = "v" + std::to_string(v.size());
    if (cpp) *cpp += "  Tensor " + name + " = " + t.code + ";\n";
    t.code = name;
    v.push_back(std::move(t));
  }
  std::vector<Term> out;
  for (const FuzzOutput& o : p.outputs) out.push_back(v[size_t(o.value)]);
  return out;
}

}  // namespace

TensorList run_program(const FuzzProgram& p, const TensorList& inputs) {
  KILN_CHECK(inputs.size() == p.inputs.size(), "fuzz program ", p.seed, ": expects ", p.inputs.size(),
             " inputs, got ", inputs.size());
  std::vector<Term> v;
  for (size_t i = 0; i < inputs.size(); ++i) v.push_back({inputs[i], "v" + std::to_string(i), true});
  TensorList out;
  for (const Term& t : interpret(p, v, nullptr)) out.push_back(t.t);
  return out;
}

std::string program_to_cpp(const FuzzProgram& p) {
  std::string s = "// kiln fuzz program, seed " + std::to_string(p.seed);
  if (p.dynamic) s += " (dynamic: dim 0 of every input is the batch, " + std::to_string(p.batch) + " here)";
  s += "\n// inputs:";
  for (size_t i = 0; i < p.inputs.size(); ++i)
    s += (i ? ", " : " ") + std::string("xs[") + std::to_string(i) + "] " + code_of(p.inputs[i].dtype) + " " +
         to_string(p.inputs[i].shape);
  s += "\n[&](std::vector<Tensor> xs) -> std::vector<Tensor> {\n";
  std::vector<Term> v;
  for (size_t i = 0; i < p.inputs.size(); ++i) {
    v.push_back({Tensor(), "v" + std::to_string(i), false});
    s += "  Tensor v" + std::to_string(i) + " = xs[" + std::to_string(i) + "];\n";
  }
  std::vector<Term> out = interpret(p, v, &s);
  s += "  return {";
  for (size_t i = 0; i < out.size(); ++i) s += (i ? ", " : "") + out[i].code;
  return s + "};\n}\n";
}

TensorList make_inputs(const FuzzProgram& p, uint64_t seed, int64_t batch) {
  TensorList xs;
  for (size_t i = 0; i < p.inputs.size(); ++i) {
    Shape s = p.inputs[i].shape;
    if (p.dynamic && batch > 0) s[0] = batch;
    xs.push_back(random_tensor(s, p.inputs[i].dtype, seed * 1000003 + i * 7919 + 1));
  }
  return xs;
}

}  // namespace kiln::test
