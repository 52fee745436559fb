// Generating fuzz programs (support/fuzz_program.h): random steps over a model of each value
// (shape as a function of the batch, dtype, magnitude bound), valid by construction.
#include "support/fuzz_program.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>

#include "support/op_db.h"
#include "support/reference.h"

namespace kiln::test {

namespace {

constexpr int64_t kMaxElements = 4096;
constexpr int64_t kMaxBatch = 8;
constexpr double kMaxMagnitude = 1e4;

// ---- The generator's model of a value: its shape as a function of the batch, its dtype, a bound
// on its magnitude, and what the comparison needs to know about how it was computed.

using Dims = std::vector<FuzzDim>;

bool same_dim(FuzzDim a, FuzzDim b) { return a.factor == b.factor && a.batch_power == b.batch_power; }
bool is_one(FuzzDim d) { return d.batch_power == 0 && d.factor == 1; }
bool is_static(FuzzDim d) { return d.batch_power == 0; }

int64_t size_at(FuzzDim d, int64_t batch) {
  int64_t s = d.factor;
  for (int i = 0; i < d.batch_power; ++i) s *= batch;
  return s;
}

int64_t numel_at(const Dims& s, int64_t batch) {
  int64_t n = 1;
  for (FuzzDim d : s) n *= size_at(d, batch);
  return n;
}

// Numpy broadcasting of two modeled shapes; false unless they broadcast at every batch size.
bool broadcast(const Dims& a, const Dims& b, Dims& out) {
  size_t r = std::max(a.size(), b.size());
  Dims o(r);
  for (size_t i = 0; i < r; ++i) {
    FuzzDim x = i < r - a.size() ? FuzzDim{} : a[i - (r - a.size())];
    FuzzDim y = i < r - b.size() ? FuzzDim{} : b[i - (r - b.size())];
    if (same_dim(x, y) || is_one(y)) o[i] = x;
    else if (is_one(x)) o[i] = y;
    else return false;
  }
  out = o;
  return true;
}

int precision_rank(DType t) {
  switch (t) {
    case DType::f64: return 0;
    case DType::f32: return 1;
    case DType::f16: return 2;
    case DType::bf16: return 3;
    default: return -1;
  }
}
DType looser(DType a, DType b) { return precision_rank(b) > precision_rank(a) ? b : a; }

// The largest magnitude up to which a dtype holds every integer.
double exact_limit(DType t) {
  switch (t) {
    case DType::f64: return 9e15;
    case DType::f32: return 16777216;
    case DType::f16: return 2048;
    case DType::bf16: return 256;
    default: return 1e18;
  }
}

// kiln's result type of pointwise ops (dsl/ops/binary.cpp): a 0-d operand does not widen operands
// with dims unless it is of a higher category (bool < integer < float).
struct Operand {
  DType dtype;
  bool zero_d;
};
DType result_type(const std::vector<Operand>& in) {
  auto cat = [](DType t) { return t == DType::bool_ ? 0 : is_integral(t) ? 1 : 2; };
  bool have_dims = false, have_scalar = false;
  DType dims_t = DType::bool_, scalar_t = DType::bool_;
  for (const Operand& m : in) {
    DType& acc = m.zero_d ? scalar_t : dims_t;
    bool& seen = m.zero_d ? have_scalar : have_dims;
    acc = seen ? promote_types(acc, m.dtype) : m.dtype;
    seen = true;
  }
  if (!have_dims) return scalar_t;
  if (!have_scalar || cat(scalar_t) <= cat(dims_t)) return dims_t;
  return is_floating(scalar_t) ? DType::f32 : scalar_t;
}
// The dtype of scalar_like(v, like) (dsl/api/pointwise.cpp).
DType scalar_dtype(double v, DType like) {
  if (is_floating(like)) return like;
  if (v == double(int64_t(v))) return like == DType::bool_ ? DType::i64 : like;
  return DType::f32;
}

// The largest input magnitude an op takes: softmax and logsumexp exponentiate differences, var
// cancels. (Unary ops other than the integer ones see their operand mapped into their domain.)
double input_cap(FuzzOp op) {
  switch (op) {
    case FuzzOp::softmax: case FuzzOp::log_softmax: case FuzzOp::logsumexp:
      return 50;
    case FuzzOp::var: return 100;
    default: return kMaxMagnitude;
  }
}

// The index of the unary database's entry `label`.
int unary_entry(const std::string& label) {
  const std::vector<UnaryOpEntry>& db = unary_op_db();
  for (size_t i = 0; i < db.size(); ++i)
    if (db[i].label == label) return int(i);
  throw Error("fuzz program: no unary op entry " + label);
}

// An upper bound of |op(x)| for x in [lo, hi]: the reference's largest magnitude on a fine grid,
// with a margin.
double largest_result(const UnaryOpEntry& e, double lo, double hi) {
  double m = 0;
  for (int i = 0; i <= 1000; ++i) m = std::max(m, std::abs(e.reference(lo + (hi - lo) * i / 1000)));
  return m * 1.01 + 1e-6;
}

struct Value {
  Dims shape;
  DType dtype = DType::f32;
  double mag = 2;            // an upper bound of |element|
  bool contiguous = true;    // known to be contiguous (so view() applies)
  bool exact = false;        // holds small integers exactly (so casts to integers are safe)
  DType precision = DType::f64;
  int depth = 0, uses = 0;
  int64_t rank() const { return int64_t(shape.size()); }
  bool numeric() const { return dtype != DType::bool_; }
  bool floating() const { return is_floating(dtype); }
  Operand operand() const { return {dtype, shape.empty()}; }
};

// Splits c into `parts` factors whose product is c (prime factors dealt to random slots).
template <class Rng>
std::vector<int64_t> split_factor(int64_t c, int parts, Rng& rng) {
  std::vector<int64_t> out(size_t(parts), 1);
  if (parts == 0) return out;
  std::uniform_int_distribution<int> slot(0, parts - 1);
  for (int64_t p = 2; c > 1; ++p)
    while (c % p == 0) {
      out[size_t(slot(rng))] *= p;
      c /= p;
    }
  return out;
}

class Generator {
 public:
  Generator(uint64_t seed, const FuzzConfig& cfg) : rng_(seed * 0x9E3779B97F4A7C15ull + 0x5851F42D4C957F2Dull), cfg_(cfg) {
    p_.seed = seed;
    p_.dynamic = cfg.dynamic;
  }

  FuzzProgram generate() {
    make_inputs();
    int n = int(uniform(cfg_.min_steps, cfg_.max_steps));
    std::vector<double> weights(kNumFuzzOps, 0);
    auto w = [&](FuzzOp op, double x) { weights[size_t(op)] = x; };
    w(FuzzOp::unary, 2.0 * double(unary_op_db().size()));  // each entry as often as another op
    for (FuzzOp op : {FuzzOp::maximum, FuzzOp::minimum, FuzzOp::mean, FuzzOp::max, FuzzOp::min, FuzzOp::var,
                      FuzzOp::logsumexp, FuzzOp::softmax, FuzzOp::log_softmax, FuzzOp::permute,
                      FuzzOp::unsqueeze, FuzzOp::squeeze, FuzzOp::narrow, FuzzOp::expand, FuzzOp::view,
                      FuzzOp::flatten, FuzzOp::unflatten, FuzzOp::contiguous})
      w(op, 2);
    for (FuzzOp op : {FuzzOp::sub, FuzzOp::div, FuzzOp::sum, FuzzOp::layer_norm, FuzzOp::transpose,
                      FuzzOp::slice, FuzzOp::reshape, FuzzOp::cat})
      w(op, 3);
    for (FuzzOp op : {FuzzOp::add, FuzzOp::mul, FuzzOp::where, FuzzOp::cast}) w(op, 4);
    w(FuzzOp::scalar, 6);
    w(FuzzOp::matmul, 5);
    w(FuzzOp::rand_like, cfg_.random_ops ? 1 : 0);
    std::discrete_distribution<int> pick_op(weights.begin(), weights.end());
    while (int(p_.steps.size()) < n) {
      bool done = false;
      for (int attempt = 0; attempt < 40 && !done; ++attempt) done = step(FuzzOp(pick_op(rng_)));
      if (!done) unary(unary_entry("tanh"));  // always fits: same shape, magnitude 1
    }
    choose_outputs();
    return p_;
  }

 private:
  int64_t uniform(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng_); }
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  double one_of(std::initializer_list<double> xs) { return *(xs.begin() + uniform(0, int64_t(xs.size()) - 1)); }
  // A dim index, printed negative some of the time.
  int64_t dim_arg(int64_t d, int64_t rank) { return chance(0.3) ? d - rank : d; }

  static FuzzStep step_of(FuzzOp op, std::vector<int> args) {
    FuzzStep s;
    s.op = op;
    s.args = std::move(args);
    return s;
  }

  const Value& val(int id) const { return values_[size_t(id)]; }

  // A value satisfying `ok`: often the most recent one (long chains), else any.
  int pick(const std::function<bool(const Value&)>& ok) {
    std::vector<int> c;
    for (size_t i = 0; i < values_.size(); ++i)
      if (ok(values_[i])) c.push_back(int(i));
    if (c.empty()) return -1;
    return chance(0.4) ? c.back() : c[size_t(uniform(0, int64_t(c.size()) - 1))];
  }

  // A new value computed from `args`: their depth plus one, their least precise float dtype.
  Value derived(const std::vector<int>& args) const {
    Value v;
    for (int a : args)
      if (a >= 0) {
        v.depth = std::max(v.depth, val(a).depth);
        v.precision = looser(v.precision, val(a).precision);
      }
    ++v.depth;
    return v;
  }

  bool emit(const FuzzStep& s, Value v) {
    for (FuzzDim d : v.shape)
      if (d.factor < 1) return false;
    if (numel_at(v.shape, p_.dynamic ? kMaxBatch : 1) > kMaxElements) return false;
    if (!(v.mag <= (v.dtype == DType::f16 ? 1e3 : kMaxMagnitude))) return false;
    v.precision = looser(v.precision, v.dtype);
    v.exact = !v.floating() || (v.exact && v.mag <= exact_limit(v.dtype));
    for (int a : s.args) ++values_[size_t(a)].uses;
    p_.steps.push_back(s);
    values_.push_back(std::move(v));
    return true;
  }

  void make_inputs() {
    int n = int(uniform(1, cfg_.max_inputs));
    int64_t rank = std::vector<int64_t>{0, 1, 1, 2, 2, 2, 2, 3, 3, 3, 4, 4}[size_t(uniform(0, 11))];
    if (p_.dynamic) rank = std::max<int64_t>(rank, 1);
    Shape base(static_cast<size_t>(rank));
    for (int64_t& d : base) d = chance(0.15) ? 1 : uniform(2, 8);
    while (numel(base) > 256) *std::max_element(base.begin(), base.end()) /= 2;
    if (p_.dynamic) p_.batch = base[0] = uniform(2, 5);
    for (int i = 0; i < n; ++i) {
      Shape s = base;
      int64_t first = p_.dynamic ? 1 : 0;  // the batch dim stays
      switch (i == 0 ? 0 : uniform(0, 3)) {
        case 1:
          for (int64_t d = first; d < int64_t(s.size()); ++d)
            if (chance(0.5)) s[size_t(d)] = 1;
          break;
        case 2:
          if (!p_.dynamic) s.erase(s.begin(), s.begin() + uniform(0, int64_t(s.size())));
          break;
        case 3:
          s.resize(size_t(uniform(first, 3)));
          for (int64_t d = first; d < int64_t(s.size()); ++d) s[size_t(d)] = uniform(1, 6);
          break;
      }
      int64_t r = uniform(0, 99);
      DType t = r < 65 ? DType::f32 : r < 85 ? DType::f64 : r < 93 ? DType::i32 : r < 97 ? DType::f16 : DType::bf16;
      if (!cfg_.low_precision && (t == DType::f16 || t == DType::bf16)) t = DType::f32;
      p_.inputs.push_back({s, t});
      Value v;
      for (size_t d = 0; d < s.size(); ++d)
        v.shape.push_back(p_.dynamic && d == 0 ? FuzzDim{1, 1} : FuzzDim{s[d], 0});
      v.dtype = t;
      v.precision = is_floating(t) ? t : DType::f64;
      v.exact = !is_floating(t);
      values_.push_back(v);
    }
  }

  bool step(FuzzOp op) {
    switch (op) {
      case FuzzOp::add: case FuzzOp::sub: case FuzzOp::mul: case FuzzOp::div: case FuzzOp::maximum:
      case FuzzOp::minimum: return binary(op);
      case FuzzOp::where: return where();
      case FuzzOp::scalar: return scalar();
      case FuzzOp::sum: case FuzzOp::mean: case FuzzOp::max: case FuzzOp::min: case FuzzOp::var:
      case FuzzOp::logsumexp: return reduction(op);
      case FuzzOp::softmax: case FuzzOp::log_softmax: return rows(op);
      case FuzzOp::layer_norm: return layer_norm();
      case FuzzOp::matmul: return matmul();
      case FuzzOp::transpose: case FuzzOp::permute: case FuzzOp::unsqueeze: case FuzzOp::squeeze:
      case FuzzOp::slice: case FuzzOp::narrow: case FuzzOp::expand: case FuzzOp::reshape: case FuzzOp::view:
      case FuzzOp::flatten: case FuzzOp::unflatten: case FuzzOp::contiguous: return view_op(op);
      case FuzzOp::cat: return cat();
      case FuzzOp::cast: return cast();
      case FuzzOp::rand_like: return rand_like();
      case FuzzOp::unary: return unary(int(uniform(0, int64_t(unary_op_db().size()) - 1)));
    }
    return false;
  }

  // Op `entry` of the unary database. The integer ops (neg, abs, ...) take any value; the others
  // take x / (|x| + 1) mapped onto the range where they are smooth (UnaryOpEntry::grad_lo..grad_hi;
  // fuzz_run.cpp's unary_op).
  bool unary(int entry) {
    const UnaryOpEntry& e = unary_op_db()[size_t(entry)];
    int a = pick([&](const Value& x) { return x.numeric(); });
    if (a < 0) return false;
    const Value& x = val(a);
    Value v = derived({a});
    v.shape = x.shape;
    v.dtype = e.integers ? x.dtype : to_floating(x.dtype);
    v.exact = e.integers && x.exact;
    v.mag = e.integers ? largest_result(e, -x.mag, x.mag) : largest_result(e, e.grad_lo, e.grad_hi);
    FuzzStep s = step_of(FuzzOp::unary, {a});
    s.variant = entry;
    return emit(s, v);
  }

  // A value whose shape broadcasts with `shape` (possibly the same value).
  int partner(const Dims& shape, const std::function<bool(const Value&)>& ok) {
    return pick([&](const Value& y) {
      Dims o;
      return ok(y) && broadcast(shape, y.shape, o);
    });
  }

  bool binary(FuzzOp op) {
    auto numeric = [](const Value& x) { return x.numeric(); };
    int a = pick(numeric);
    if (a < 0) return false;
    int b = partner(val(a).shape, numeric);
    const Value &x = val(a), &y = val(b);
    Value v = derived({a, b});
    broadcast(x.shape, y.shape, v.shape);
    if (op == FuzzOp::div) {  // x / (abs(y) + 1)
      DType denom = result_type({y.operand(), {scalar_dtype(1.0, y.dtype), true}});
      v.dtype = to_floating(result_type({x.operand(), {denom, y.shape.empty()}}));
      v.mag = x.mag;
    } else {
      v.dtype = result_type({x.operand(), y.operand()});
      v.exact = x.exact && y.exact;
      v.mag = op == FuzzOp::mul ? x.mag * y.mag : op == FuzzOp::add || op == FuzzOp::sub ? x.mag + y.mag
                                                                                            : std::max(x.mag, y.mag);
    }
    return emit(step_of(op, {a, b}), v);
  }

  // where(cmp(a, b), c, d), with b or d sometimes a scalar (variant 1, 2). Float operands are
  // compared with <, <=, >, >= only: equality of computed floats is a tie that rounding decides.
  bool where() {
    int64_t form = uniform(0, 2);
    int a = pick([](const Value& x) { return x.numeric(); });
    if (a < 0) return false;
    if (form == 1 && !val(a).floating()) form = 0;
    FuzzStep s = step_of(FuzzOp::where, {a});
    Dims cond = val(a).shape;
    bool ints = !val(a).floating();
    if (form != 1) {
      int b = partner(cond, [](const Value& y) { return y.numeric(); });
      broadcast(cond, val(b).shape, cond);
      ints = ints && !val(b).floating();
      s.args.push_back(b);
    } else {
      s.scalar = one_of({0.0, 0.5, -0.25, 1.0});
    }
    s.ints = {uniform(0, ints ? 5 : 3)};  // lt le gt ge eq ne
    int c = partner(cond, [](const Value&) { return true; });
    s.args.push_back(c);
    Dims out;
    broadcast(cond, val(c).shape, out);
    if (form == 2 && !val(c).floating()) form = 0;
    if (form != 2) {
      int d = partner(out, [](const Value&) { return true; });
      broadcast(out, val(d).shape, out);
      s.args.push_back(d);
    } else {
      s.scalar = one_of({0.0, -1.5, 2.0});
    }
    s.variant = form;
    Value v = derived(s.args);
    v.shape = out;
    const Value& cv = val(c);
    if (form == 2) {
      v.dtype = result_type({cv.operand(), {scalar_dtype(s.scalar, cv.dtype), true}});
      v.mag = std::max(cv.mag, std::abs(s.scalar));
      v.exact = cv.exact;
    } else {
      const Value& dv = val(s.args.back());
      v.dtype = result_type({cv.operand(), dv.operand()});
      v.mag = std::max(cv.mag, dv.mag);
      v.exact = cv.exact && dv.exact;
    }
    return emit(s, v);
  }

  // x * s, x + s, s - x, x / s.
  bool scalar() {
    int a = pick([](const Value& x) { return x.numeric(); });
    if (a < 0) return false;
    const Value& x = val(a);
    FuzzStep s = step_of(FuzzOp::scalar, {a});
    s.variant = uniform(0, 3);
    s.scalar = s.variant == 3 ? one_of({2.5, -0.5, 4.0, 0.75}) : one_of({2.5, -0.5, 0.25, 1.5, 3.0, -2.0});
    Value v = derived({a});
    v.shape = x.shape;
    v.dtype = result_type({x.operand(), {scalar_dtype(s.scalar, x.dtype), true}});
    if (s.variant == 3) v.dtype = to_floating(v.dtype);
    double m = std::abs(s.scalar);
    v.mag = s.variant == 0 ? x.mag * m : s.variant == 3 ? x.mag / m : x.mag + m;
    v.exact = x.exact && s.variant != 3 && s.scalar == std::floor(s.scalar);
    return emit(s, v);
  }

  bool reduction(FuzzOp op) {
    int a = pick([&](const Value& x) { return x.numeric() && x.mag <= input_cap(op); });
    if (a < 0) return false;
    const Value& x = val(a);
    int64_t r = x.rank();
    bool all = r == 0 || chance(0.2);
    std::vector<bool> reduced(size_t(r), all);
    if (!all) {
      for (size_t d = 0; d < reduced.size(); ++d) reduced[d] = chance(0.4);
      reduced[size_t(uniform(0, r - 1))] = true;
    }
    bool keepdim = chance(0.5);
    FuzzStep s = step_of(op, {a});
    Value v = derived({a});
    int64_t most = 1, least = 1;  // the reduced count at the largest and smallest batch
    for (int64_t d = 0; d < r; ++d) {
      FuzzDim dim = x.shape[size_t(d)];
      if (!reduced[size_t(d)]) {
        v.shape.push_back(dim);
        continue;
      }
      if (!all) s.ints.push_back(dim_arg(d, r));
      most *= size_at(dim, kMaxBatch);
      least *= size_at(dim, 2);
      if (keepdim) v.shape.push_back(FuzzDim{});
    }
    int64_t correction = 1;
    v.dtype = to_floating(x.dtype);
    v.mag = x.mag;
    switch (op) {
      case FuzzOp::sum:
        v.dtype = is_integral(x.dtype) ? DType::i64 : x.dtype;
        v.mag = x.mag * double(most);
        v.exact = x.exact;
        break;
      case FuzzOp::max: case FuzzOp::min:
        v.dtype = x.dtype;
        v.exact = x.exact;
        break;
      case FuzzOp::var:
        correction = least >= 2 && chance(0.7) ? 1 : 0;
        v.mag = 2 * x.mag * x.mag;
        break;
      case FuzzOp::logsumexp: v.mag = x.mag + std::log(double(most)); break;
      default: break;
    }
    s.variant = int64_t(keepdim) | correction << 1;
    return emit(s, v);
  }

  bool rows(FuzzOp op) {
    int a = pick([&](const Value& x) { return x.numeric() && x.rank() >= 1 && x.mag <= input_cap(op); });
    if (a < 0) return false;
    const Value& x = val(a);
    int64_t d = uniform(0, x.rank() - 1);
    Value v = derived({a});
    v.shape = x.shape;
    v.dtype = to_floating(x.dtype);
    v.mag = op == FuzzOp::softmax ? 1 : 2 * x.mag + std::log(double(size_at(x.shape[size_t(d)], kMaxBatch)));
    FuzzStep s = step_of(op, {a});
    s.ints = {dim_arg(d, x.rank())};
    return emit(s, v);
  }

  // layer_norm of tanh(x) plus a ramp over 1-3 static trailing dims (its rows are never constant:
  // it would amplify rounding by 1/sqrt(eps)); variant bit 0: weight, bit 1: bias.
  bool layer_norm() {
    int a = pick([](const Value& x) { return x.numeric() && x.rank() >= 1 && is_static(x.shape.back()); });
    if (a < 0) return false;
    const Value& x = val(a);
    int64_t k = 0;
    while (k < std::min<int64_t>(x.rank(), 3) && is_static(x.shape[size_t(x.rank() - 1 - k)])) ++k;
    k = uniform(1, k);
    FuzzStep s = step_of(FuzzOp::layer_norm, {a});
    for (int64_t d = x.rank() - k; d < x.rank(); ++d) s.shape.push_back(x.shape[size_t(d)].factor);
    s.variant = uniform(0, 3);
    s.scalar = chance(0.5) ? 1e-5 : 1e-3;
    s.dtype = to_floating(x.dtype);
    Value v = derived({a});
    v.shape = x.shape;
    v.dtype = to_floating(x.dtype);
    v.mag = (s.variant & 1 ? 1.5 : 1) * std::sqrt(double(numel(s.shape))) + (s.variant & 2 ? 0.5 : 0);
    return emit(s, v);
  }

  // variant 0: x @ y^T (y a value); 1: x @ W; 2: W @ x (W a constant of shape s.shape).
  bool matmul() {
    int a = pick([](const Value& x) { return x.floating(); });
    if (a < 0) return false;
    const Value& x = val(a);
    int64_t r = x.rank();
    FuzzStep s = step_of(FuzzOp::matmul, {a});
    s.variant = uniform(0, 2);
    s.dtype = x.dtype;
    Value v = derived({a});
    v.dtype = x.dtype;
    FuzzDim k;
    Dims batch(x.shape.begin(), x.shape.end() - std::min<int64_t>(r, 2));
    if (s.variant == 0) {
      if (r < 2) return false;
      k = x.shape.back();
      int b = pick([&](const Value& y) {
        Dims o, yb(y.shape.begin(), y.shape.end() - std::min<int64_t>(y.rank(), 2));
        return y.dtype == x.dtype && y.rank() >= 2 && same_dim(y.shape.back(), k) && broadcast(batch, yb, o);
      });
      if (b < 0) return false;
      const Value& y = val(b);
      broadcast(batch, Dims(y.shape.begin(), y.shape.end() - 2), v.shape);
      v.shape.push_back(x.shape[size_t(r - 2)]);
      v.shape.push_back(y.shape[size_t(y.rank() - 2)]);
      v.mag = x.mag * y.mag * double(size_at(k, kMaxBatch));
      v.precision = looser(v.precision, y.precision);
      v.depth = std::max(v.depth, y.depth + 1);
      s.args.push_back(b);
      return emit(s, v);
    }
    if (r == 0) return false;
    k = s.variant == 1 || r == 1 ? x.shape.back() : x.shape[size_t(r - 2)];
    if (!is_static(k)) return false;
    int64_t n = uniform(1, 8);
    if (s.variant == 1) {
      int64_t form = uniform(0, 2);  // W: [K, N], [K], or batched [.., K, N]
      if (form == 1) {
        s.shape = {k.factor};
        v.shape.assign(x.shape.begin(), x.shape.end() - 1);
      } else {
        Dims wb;
        if (form == 2 && !batch.empty())
          for (size_t i = batch.size() - size_t(uniform(1, int64_t(batch.size())));
               i < batch.size(); ++i)
            wb.push_back(is_static(batch[i]) && chance(0.7) ? batch[i] : FuzzDim{});
        for (FuzzDim d : wb) s.shape.push_back(d.factor);
        s.shape.push_back(k.factor);
        s.shape.push_back(n);
        broadcast(batch, wb, v.shape);
        if (r >= 2) v.shape.push_back(x.shape[size_t(r - 2)]);
        v.shape.push_back(FuzzDim{n, 0});
      }
    } else {
      s.shape = {n, k.factor};
      v.shape = batch;
      v.shape.push_back(FuzzDim{n, 0});
      if (r >= 2) v.shape.push_back(x.shape.back());
    }
    v.mag = x.mag * double(k.factor);
    return emit(s, v);
  }

  // Sizes for reshape/view of `x`: the static factors dealt into 1-4 dims, and -1 for the dim
  // that takes the batch (dynamic programs never pass a size that depends on it).
  void reshape_target(const Value& x, FuzzStep& s, Value& v) {
    int64_t p = 1;
    int k = 0;
    for (FuzzDim d : x.shape) {
      p *= d.factor;
      k += d.batch_power;
    }
    int parts = int(uniform(p == 1 && k == 0 ? 0 : 1, 4));
    std::vector<int64_t> f = split_factor(p, parts, rng_);
    int64_t infer = parts == 0 ? -1 : k > 0 || chance(0.5) ? uniform(0, parts - 1) : -1;
    for (int i = 0; i < parts; ++i) {
      s.ints.push_back(i == infer ? -1 : f[size_t(i)]);
      v.shape.push_back(FuzzDim{f[size_t(i)], i == infer ? k : 0});
    }
  }

  bool view_op(FuzzOp op) {
    bool needs_dims = op == FuzzOp::transpose || op == FuzzOp::permute || op == FuzzOp::slice ||
                      op == FuzzOp::narrow || op == FuzzOp::unflatten;
    int a = pick([&](const Value& x) {
      return (!needs_dims || x.rank() >= 1) && (op != FuzzOp::view || x.contiguous);
    });
    if (a < 0) return false;
    const Value& x = val(a);
    int64_t r = x.rank();
    FuzzStep s = step_of(op, {a});
    if ((op == FuzzOp::reshape || op == FuzzOp::flatten) && !x.contiguous && p_.dynamic) p_.layout_dependent = true;
    Value v = x;
    v.depth = x.depth + 1;
    v.uses = 0;
    v.contiguous = false;
    switch (op) {
      case FuzzOp::transpose: {
        int64_t d0 = uniform(0, r - 1), d1 = uniform(0, r - 1);
        std::swap(v.shape[size_t(d0)], v.shape[size_t(d1)]);
        s.ints = {dim_arg(d0, r), dim_arg(d1, r)};
        v.contiguous = x.contiguous && d0 == d1;
        break;
      }
      case FuzzOp::permute: {
        std::vector<int64_t> perm(static_cast<size_t>(r));
        for (int64_t d = 0; d < r; ++d) perm[size_t(d)] = d;
        std::shuffle(perm.begin(), perm.end(), rng_);
        v.contiguous = x.contiguous && std::is_sorted(perm.begin(), perm.end());
        for (int64_t d = 0; d < r; ++d) {
          v.shape[size_t(d)] = x.shape[size_t(perm[size_t(d)])];
          s.ints.push_back(dim_arg(perm[size_t(d)], r));
        }
        break;
      }
      case FuzzOp::unsqueeze: {
        int64_t d = uniform(0, r);
        v.shape.insert(v.shape.begin() + d, FuzzDim{});
        s.ints = {chance(0.3) ? d - r - 1 : d};
        v.contiguous = x.contiguous;
        break;
      }
      case FuzzOp::squeeze:
        if (r > 0 && chance(0.5)) {
          int64_t d = uniform(0, r - 1);
          s.ints = {dim_arg(d, r)};
          if (is_one(x.shape[size_t(d)])) v.shape.erase(v.shape.begin() + d);
        } else {
          v.shape.erase(std::remove_if(v.shape.begin(), v.shape.end(), is_one), v.shape.end());
        }
        v.contiguous = x.contiguous;
        break;
      case FuzzOp::slice: case FuzzOp::narrow: {
        int64_t d = uniform(0, r - 1);
        FuzzDim dim = x.shape[size_t(d)];
        if (!is_static(dim)) return false;
        int64_t n = dim.factor, start = uniform(0, n - 1);
        if (op == FuzzOp::narrow) {
          int64_t len = uniform(1, n - start);
          s.ints = {dim_arg(d, r), start, len};
          v.shape[size_t(d)].factor = len;
          break;
        }
        int64_t end = uniform(start + 1, n), step = uniform(1, 3);
        v.shape[size_t(d)].factor = (end - start + step - 1) / step;
        int64_t start_arg = chance(0.2) ? start - n : start;
        int64_t end_arg = end < n && chance(0.3) ? end - n : end == n && chance(0.3) ? n + 3 : end;
        s.ints = {dim_arg(d, r), start_arg, end_arg, step};
        break;
      }
      case FuzzOp::expand: {
        Dims out;
        for (int64_t e = chance(0.3) ? uniform(1, 4) : 0; e > 0; --e) {
          out.push_back(FuzzDim{uniform(1, 4), 0});
          s.ints.push_back(out.back().factor);
        }
        for (FuzzDim d : x.shape) {
          bool grow = is_one(d) && chance(0.8);
          out.push_back(grow ? FuzzDim{uniform(1, 6), 0} : d);
          s.ints.push_back(grow ? out.back().factor : -1);
        }
        v.shape = out;
        break;
      }
      case FuzzOp::reshape: case FuzzOp::view:
        v.shape.clear();
        reshape_target(x, s, v);
        v.contiguous = x.contiguous;
        break;
      case FuzzOp::flatten:
        if (r == 0) {
          v.shape = {FuzzDim{}};
        } else {
          int64_t b = uniform(0, r - 1), e = uniform(b, r - 1);
          FuzzDim merged{1, 0};
          for (int64_t d = b; d <= e; ++d) {
            merged.factor *= x.shape[size_t(d)].factor;
            merged.batch_power += x.shape[size_t(d)].batch_power;
          }
          v.shape.erase(v.shape.begin() + b, v.shape.begin() + e + 1);
          v.shape.insert(v.shape.begin() + b, merged);
          s.ints = {dim_arg(b, r), dim_arg(e, r)};
        }
        v.contiguous = x.contiguous;
        break;
      case FuzzOp::unflatten: {
        int64_t d = uniform(0, r - 1);
        FuzzDim dim = x.shape[size_t(d)];
        int parts = int(uniform(1, 3));
        std::vector<int64_t> f = split_factor(dim.factor, parts, rng_);
        int64_t infer = dim.batch_power > 0 || chance(0.4) ? uniform(0, parts - 1) : -1;
        Dims sizes;
        for (int i = 0; i < parts; ++i) {
          s.shape.push_back(i == infer ? -1 : f[size_t(i)]);
          sizes.push_back(FuzzDim{f[size_t(i)], i == infer ? dim.batch_power : 0});
        }
        v.shape.erase(v.shape.begin() + d);
        v.shape.insert(v.shape.begin() + d, sizes.begin(), sizes.end());
        s.ints = {dim_arg(d, r)};
        v.contiguous = x.contiguous;
        break;
      }
      default:  // contiguous
        v.contiguous = true;
    }
    return emit(s, v);
  }

  bool cat() {
    int a = pick([](const Value& x) { return x.numeric() && x.rank() >= 1; });
    if (a < 0) return false;
    const Value& x = val(a);
    int64_t d = uniform(0, x.rank() - 1);
    // Along a batch dim only copies of x: kiln keeps a sum of sizes symbolic only when it is a
    // multiple of one symbol, and the batch dims of different inputs are different symbols.
    bool batch_dim = !is_static(x.shape[size_t(d)]);
    auto fits = [&](const Value& y) {
      if (!y.numeric() || y.rank() != x.rank() || (batch_dim && &y != &x)) return false;
      for (int64_t i = 0; i < x.rank(); ++i)
        if (i == d ? y.shape[size_t(i)].batch_power != x.shape[size_t(i)].batch_power
                   : !same_dim(y.shape[size_t(i)], x.shape[size_t(i)]))
          return false;
      return true;
    };
    FuzzStep s = step_of(FuzzOp::cat, {a});
    for (int64_t n = uniform(1, 2); n > 0; --n) s.args.push_back(pick(fits));
    std::shuffle(s.args.begin(), s.args.end(), rng_);
    s.ints = {dim_arg(d, x.rank())};
    Value v = derived(s.args);
    v.shape = x.shape;
    v.shape[size_t(d)].factor = 0;
    v.dtype = val(s.args[0]).dtype;
    v.mag = 0;
    v.exact = true;
    for (int i : s.args) {
      const Value& y = val(i);
      v.shape[size_t(d)].factor += y.shape[size_t(d)].factor;
      v.dtype = promote_types(v.dtype, y.dtype);
      v.mag = std::max(v.mag, y.mag);
      v.exact = v.exact && y.exact;
      v.precision = looser(v.precision, y.precision);
    }
    return emit(s, v);
  }

  // Between float dtypes; integers and bool to anything; floats to integers only when they hold
  // small integers exactly (a rounding difference would otherwise flip the result).
  bool cast() {
    int a = pick([](const Value&) { return true; });
    const Value& x = val(a);
    std::vector<DType> to;
    for (DType t : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32, DType::i64, DType::bool_}) {
      bool low = t == DType::f16 || t == DType::bf16;
      if (t == x.dtype || (low && !cfg_.low_precision) || (t == DType::f16 && x.mag > 1e3)) continue;
      if (x.floating() && !is_floating(t) && !x.exact) continue;
      to.push_back(t);
    }
    FuzzStep s = step_of(FuzzOp::cast, {a});
    s.dtype = to[size_t(uniform(0, int64_t(to.size()) - 1))];
    Value v = x;
    v.depth = x.depth + 1;
    v.uses = 0;
    v.contiguous = true;
    v.dtype = s.dtype;
    if (s.dtype == DType::bool_) v.mag = 1;
    return emit(s, v);
  }

  bool rand_like() {
    int a = pick([](const Value&) { return true; });
    FuzzStep s = step_of(FuzzOp::rand_like, {a});
    DType t = val(a).dtype;
    s.dtype = t == DType::f64 ? t : DType::f32;
    Value v = derived({a});
    v.shape = val(a).shape;
    v.dtype = s.dtype;
    v.mag = 0.5;
    return emit(s, v);
  }

  // The last value, and up to two more (values nothing else used, first).
  void choose_outputs() {
    int n_in = int(p_.inputs.size()), last = int(values_.size()) - 1;
    std::vector<int> outs{last}, unused, steps;
    for (int i = n_in; i < last; ++i) (val(i).uses == 0 ? unused : steps).push_back(i);
    for (int64_t extra = uniform(0, 2); extra > 0; --extra) {
      std::vector<int>& from = !unused.empty() && chance(0.8) ? unused : steps;
      if (chance(0.05)) outs.push_back(int(uniform(0, n_in - 1)));
      else if (!from.empty()) outs.push_back(from[size_t(uniform(0, int64_t(from.size()) - 1))]);
    }
    std::sort(outs.begin() + 1, outs.end());
    outs.erase(std::unique(outs.begin() + 1, outs.end()), outs.end());
    for (int o : outs) {
      const Value& v = val(o);
      p_.outputs.push_back({o, v.shape, v.dtype, v.precision, v.depth});
    }
  }

  std::mt19937_64 rng_;
  FuzzConfig cfg_;
  FuzzProgram p_;
  std::vector<Value> values_;
};

}  // namespace

std::string_view fuzz_op_name(FuzzOp op) {
  static const char* names[kNumFuzzOps] = {
      "unary", "add", "sub", "mul", "div", "maximum", "minimum", "where", "scalar", "sum", "mean", "max", "min", "var",
      "logsumexp", "softmax", "log_softmax", "layer_norm", "matmul", "transpose", "permute", "unsqueeze",
      "squeeze", "slice", "narrow", "expand", "reshape", "view", "flatten", "unflatten", "contiguous", "cat",
      "cast", "rand_like"};
  return names[int(op)];
}

std::string fuzz_step_name(const FuzzStep& s) {
  return s.op == FuzzOp::unary ? unary_op_db().at(size_t(s.variant)).label : std::string(fuzz_op_name(s.op));
}

std::vector<std::string> fuzz_step_names() {
  std::vector<std::string> names;
  for (const UnaryOpEntry& e : unary_op_db()) names.push_back(e.label);
  for (int i = 0; i < kNumFuzzOps; ++i)
    if (FuzzOp(i) != FuzzOp::unary) names.emplace_back(fuzz_op_name(FuzzOp(i)));
  return names;
}

FuzzProgram generate_program(uint64_t seed, const FuzzConfig& config) { return Generator(seed, config).generate(); }

Shape expected_shape(const FuzzProgram& p, size_t i, int64_t batch) {
  Shape s;
  for (FuzzDim d : p.outputs.at(i).shape) s.push_back(size_at(d, batch > 0 ? batch : p.batch));
  return s;
}

}  // namespace kiln::test
