#include "support/reference.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "dsl/atomic_file.h"

namespace kiln::test {

Tensor random_tensor(const Shape& shape, DType dtype, uint64_t seed, double lo, double hi) {
  std::mt19937_64 gen(seed * 0x9E3779B97F4A7C15ull + 12345);
  std::uniform_real_distribution<double> dist(lo, hi);
  Tensor t = Tensor::empty(shape, {dtype, Device::cpu()});
  for (int64_t i = 0; i < t.numel(); ++i) {
    double v = dist(gen);
    if (is_integral(dtype)) v = std::floor(v);
    if (dtype == DType::bool_) v = v > (lo + hi) / 2;
    store_from_double(t.data_ptr(), dtype, i, v);
  }
  return t;
}

Tensor random_view(const Shape& shape, DType dtype, uint64_t seed, const std::string& kind) {
  Tensor dense = random_tensor(shape, dtype, seed);
  std::vector<double> v = host_values(dense);
  int64_t r = int64_t(shape.size());
  if (kind == "transposed" && r >= 2) {
    Shape swapped = shape;
    std::swap(swapped[r - 1], swapped[r - 2]);
    Tensor base = Tensor::empty(swapped, {dtype, Device::cpu()});
    Tensor view = base.transpose(-1, -2);
    int64_t i = 0;
    for_each_index(shape, [&](const std::vector<int64_t>& idx) {
      int64_t off = 0;
      for (int64_t d = 0; d < r; ++d) off += idx[d] * view.strides()[d];
      store_from_double(base.data_ptr(), dtype, off, v[i++]);
    });
    return view;
  }
  if (kind == "sliced") {
    Shape big;
    for (int64_t d : shape) big.push_back(2 * d + 1);
    Tensor base = random_tensor(big, dtype, seed + 7);
    Tensor view = base;
    for (int64_t d = 0; d < r; ++d) view = view.slice(d, 1, 2 * shape[d] + 1, 2);
    int64_t i = 0;
    for_each_index(shape, [&](const std::vector<int64_t>& idx) {
      int64_t off = view.storage_offset();
      for (int64_t d = 0; d < r; ++d) off += idx[d] * view.strides()[d];
      store_from_double(base.storage()->data, dtype, off, v[i++]);
    });
    return view;
  }
  if (kind == "expanded") {
    Shape small = shape;
    for (int64_t d = 0; d < r; d += 2) small[d] = 1;
    return random_tensor(small, dtype, seed).expand(shape);
  }
  return dense;
}

TempDir::TempDir(const std::string& name)
    : path(std::filesystem::temp_directory_path() / (name + "-" + std::to_string(::getpid()))) {
  std::filesystem::create_directories(path);
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
}

bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  Tensor x = a.to(Device::cpu()).contiguous(), y = b.to(Device::cpu()).contiguous();
  return std::memcmp(x.data_ptr(), y.data_ptr(), size_t(x.numel()) * itemsize(x.dtype())) == 0;
}

std::vector<double> host_values(const Tensor& t) {
  if (!t.device().is_cpu()) return host_values(t.to(Device::cpu()));
  std::vector<double> out;
  out.reserve(size_t(t.numel()));
  const void* base = t.storage()->data;
  for_each_index(t.shape(), [&](const std::vector<int64_t>& idx) {
    int64_t off = t.storage_offset();
    for (size_t d = 0; d < idx.size(); ++d) off += idx[d] * t.strides()[d];
    out.push_back(load_as_double(base, t.dtype(), off));
  });
  return out;
}

void for_each_index(const Shape& shape, const std::function<void(const std::vector<int64_t>&)>& fn) {
  if (numel(shape) == 0) return;
  std::vector<int64_t> idx(shape.size(), 0);
  while (true) {
    fn(idx);
    int64_t d = int64_t(shape.size()) - 1;
    while (d >= 0 && ++idx[d] == shape[d]) idx[d--] = 0;
    if (d < 0) return;
  }
}

std::vector<double> reduction_reference(const Tensor& x, const std::vector<int64_t>& dims, const Reducer& f,
                                        Shape* out_shape, bool keepdim) {
  int64_t rank = x.dim();
  std::vector<bool> reduced(size_t(rank), dims.empty());
  for (int64_t d : dims)
    if (rank > 0) reduced[size_t(d < 0 ? d + rank : d)] = true;
  Shape kept, red, shape;
  for (int64_t d = 0; d < rank; ++d) {
    (reduced[size_t(d)] ? red : kept).push_back(x.size(d));
    if (!reduced[size_t(d)]) shape.push_back(x.size(d));
    else if (keepdim) shape.push_back(1);
  }
  *out_shape = shape;
  std::vector<double> v = host_values(x), out;
  Strides st = contiguous_strides(x.shape());
  auto element = [&](const std::vector<int64_t>& k, const std::vector<int64_t>& r) {
    int64_t off = 0;
    size_t ki = 0, ri = 0;
    for (int64_t d = 0; d < rank; ++d) off += (reduced[size_t(d)] ? r[ri++] : k[ki++]) * st[size_t(d)];
    return v[size_t(off)];
  };
  auto one_row = [&](const std::vector<int64_t>& k) {
    std::vector<double> row;
    if (numel(red) > 0) for_each_index(red, [&](const std::vector<int64_t>& r) { row.push_back(element(k, r)); });
    out.push_back(f(row));
  };
  if (numel(kept) > 0) for_each_index(kept, one_row);
  return out;
}

double sum_of(const std::vector<double>& v) {
  double s = 0;
  for (double e : v) s += e;
  return s;
}
double mean_of(const std::vector<double>& v) { return sum_of(v) / double(v.size()); }
double max_of(const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }
double min_of(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }
Reducer var_of(int64_t correction) {
  return [correction](const std::vector<double>& v) {
    double m = mean_of(v), s = 0;
    for (double e : v) s += (e - m) * (e - m);
    return s / std::max<double>(double(v.size()) - double(correction), 0);
  };
}
double logsumexp_of(const std::vector<double>& v) {
  double m = max_of(v), s = 0;
  if (std::isinf(m)) return m;  // PyTorch's value of a row whose max is infinite
  for (double e : v) s += std::exp(e - m);
  return std::log(s) + m;
}

namespace {

// f over the lines along `dim` of tensors of one shape (each tensor's line, in order); the
// results land where the lines were.
std::vector<double> along_dim_of(const TensorList& xs, int64_t dim, const std::function<Line(const std::vector<Line>&)>& f) {
  std::vector<Line> values;
  for (const Tensor& x : xs) values.push_back(host_values(x));
  const Tensor& x = xs[0];
  if (x.dim() == 0) return f(values);
  int64_t d = dim < 0 ? dim + x.dim() : dim;
  int64_t n = x.size(d), inner = 1;
  for (int64_t i = d + 1; i < x.dim(); ++i) inner *= x.size(i);
  Line out(values[0].size());
  int64_t outer = n == 0 ? 0 : int64_t(out.size()) / (n * inner);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      std::vector<Line> lines(values.size());
      for (size_t t = 0; t < values.size(); ++t)
        for (int64_t k = 0; k < n; ++k) lines[t].push_back(values[t][size_t((o * n + k) * inner + i)]);
      Line r = f(lines);
      for (int64_t k = 0; k < n; ++k) out[size_t((o * n + k) * inner + i)] = r[size_t(k)];
    }
  return out;
}

}  // namespace

std::vector<double> along_dim(const Tensor& x, int64_t dim, const std::function<Line(const Line&)>& f) {
  return along_dim_of({x}, dim, [&](const std::vector<Line>& l) { return f(l[0]); });
}

std::vector<double> along_dim(const Tensor& a, const Tensor& b, int64_t dim,
                              const std::function<Line(const Line&, const Line&)>& f) {
  return along_dim_of({a, b}, dim, [&](const std::vector<Line>& l) { return f(l[0], l[1]); });
}

std::vector<double> log_softmax_line(const std::vector<double>& line) {
  double lse = logsumexp_of(line);
  std::vector<double> r;
  for (double e : line) r.push_back(e - lse);
  return r;
}

std::vector<double> softmax_line(const std::vector<double>& line) {
  std::vector<double> r = log_softmax_line(line);
  for (double& e : r) e = std::exp(e);
  return r;
}

std::vector<double> layer_norm_reference(const Tensor& x, int64_t normalized, const Tensor& w, const Tensor& b,
                                         double eps) {
  std::vector<double> v = host_values(x), wv, bv;
  if (w.defined()) wv = host_values(w);
  if (b.defined()) bv = host_values(b);
  for (size_t row = 0; normalized > 0 && row < v.size() / size_t(normalized); ++row) {
    double* p = v.data() + row * size_t(normalized);
    double mean = 0, var = 0;
    for (int64_t i = 0; i < normalized; ++i) mean += p[i];
    mean /= double(normalized);
    for (int64_t i = 0; i < normalized; ++i) var += (p[i] - mean) * (p[i] - mean);
    var /= double(normalized);
    for (int64_t i = 0; i < normalized; ++i) {
      p[i] = (p[i] - mean) / std::sqrt(var + eps);
      if (!wv.empty()) p[i] *= wv[size_t(i)];
      if (!bv.empty()) p[i] += bv[size_t(i)];
    }
  }
  return v;
}

double cross_entropy_reference(const Tensor& logits, const Tensor& targets) {
  int64_t classes = logits.size(-1);
  std::vector<double> v = host_values(logits), t = host_values(targets);
  double total = 0;
  for (size_t n = 0; n < t.size(); ++n) {
    std::vector<double> row(v.begin() + int64_t(n) * classes, v.begin() + int64_t(n + 1) * classes);
    total -= log_softmax_line(row)[size_t(t[n])];
  }
  return total / double(t.size());
}

int64_t broadcast_offset(const Shape& shape, const std::vector<int64_t>& idx) {
  int64_t off = 0, lead = int64_t(idx.size()) - int64_t(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) off = off * shape[d] + (shape[d] == 1 ? 0 : idx[lead + d]);
  return off;
}

Tolerance tolerance(DType t) {
  switch (t) {
    case DType::f64: return {1e-10, 1e-12};
    case DType::f32: return {2e-5, 2e-6};
    case DType::f16: return {2e-3, 1e-3};
    case DType::bf16: return {1.6e-2, 1e-2};
    default: return {0, 0};
  }
}

void check_close(const Tensor& got, const std::vector<double>& want, const Shape& want_shape,
                 Tolerance tol, const std::string& what) {
  BOOST_TEST_CONTEXT(what) {
    BOOST_TEST_REQUIRE(to_string(got.shape()) == to_string(want_shape));
    BOOST_TEST_REQUIRE(got.numel() == int64_t(want.size()));
    std::vector<double> v = host_values(got);
    int bad = 0;
    for (size_t i = 0; i < v.size(); ++i) {
      double err = std::abs(v[i] - want[i]);
      bool ok = err <= tol.atol + tol.rtol * std::abs(want[i]) ||
                (std::isnan(v[i]) && std::isnan(want[i])) || v[i] == want[i];
      if (!ok && bad++ < 5)
        BOOST_ERROR("element " << i << ": got " << v[i] << ", want " << want[i] << " (err " << err << ")");
    }
    BOOST_TEST(bad == 0, bad << " of " << v.size() << " elements out of tolerance");
  }
}

void check_error(const std::function<void()>& fn, const std::vector<std::string>& parts) {
  try {
    fn();
  } catch (const Error& e) {
    std::string msg = e.what();
    for (const std::string& p : parts)
      BOOST_TEST(msg.find(p) != std::string::npos, "error message '" << msg << "' lacks '" << p << "'");
    return;
  }
  BOOST_ERROR("expected kiln::Error containing '" << (parts.empty() ? "" : parts[0]) << "'");
}

std::string file_bytes(const std::string& path) { return read_file(path).value_or(""); }

std::string dumped(const std::string& dir, const std::string& suffix) {
  std::string found;
  int count = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    std::string name = e.path().filename().string();
    if (name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      found = file_bytes(e.path().string());
      ++count;
    }
  }
  BOOST_TEST(count == 1, "files ending in " << suffix << ": " << count);
  return found;
}

double gelu_reference(double x, const std::string& approximate) {
  if (approximate == "tanh") return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
  return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
}

double gelu_grad_reference(double x, const std::string& approximate) {
  if (approximate == "tanh") {
    const double k = std::sqrt(2 / M_PI), c = 0.044715, t = std::tanh(k * (x + c * x * x * x));
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * c * x * x);
  }
  return 0.5 * (1 + std::erf(x / std::sqrt(2.0))) + x * std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
}

std::vector<double> matmul_reference(const Tensor& a, const Tensor& b, Shape* shape) {
  Shape sa = a.shape(), sb = b.shape();
  std::vector<double> va = host_values(a), vb = host_values(b), out;
  bool a_vec = sa.size() == 1, b_vec = sb.size() == 1;
  if (a_vec) sa.insert(sa.begin(), 1);
  if (b_vec) sb.push_back(1);
  int64_t m = sa[sa.size() - 2], k = sa.back(), n = sb.back();
  Shape ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2);
  *shape = broadcast_shapes("reference", ba, bb);
  for_each_index(*shape, [&](const std::vector<int64_t>& idx) {
    int64_t oa = broadcast_offset(ba, idx) * m * k, ob = broadcast_offset(bb, idx) * k * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t q = 0; q < k; ++q) s += va[size_t(oa + i * k + q)] * vb[size_t(ob + q * n + j)];
        out.push_back(s);
      }
  });
  if (!a_vec) shape->push_back(m);
  if (!b_vec) shape->push_back(n);
  return out;
}

std::vector<double> linear_reference(const Tensor& x, const Tensor& w, const Tensor& bias) {
  const int64_t n = w.size(0), k = w.size(1), m = x.numel() / k;
  std::vector<double> vx = host_values(x), vw = host_values(w), vb;
  if (bias.defined()) vb = host_values(bias);
  std::vector<double> out(size_t(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = vb.empty() ? 0 : vb[size_t(j)];
      for (int64_t q = 0; q < k; ++q) s += vx[size_t(i * k + q)] * vw[size_t(j * k + q)];
      out[size_t(i * n + j)] = s;
    }
  return out;
}

AttentionReference attention_reference(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& dout, bool causal, double scale) {
  const int64_t B = q.size(0), H = q.size(1), Tq = q.size(2), Tk = k.size(2), D = q.size(3), Dv = v.size(3);
  std::vector<double> Q = host_values(q), K = host_values(k), V = host_values(v), G = host_values(dout);
  AttentionReference r{std::vector<double>(size_t(B * H * Tq * Dv)), std::vector<double>(Q.size()),
              std::vector<double>(K.size()), std::vector<double>(V.size())};
  for (int64_t bh = 0; bh < B * H; ++bh) {
    const double *q0 = &Q[size_t(bh * Tq * D)], *k0 = &K[size_t(bh * Tk * D)], *v0 = &V[size_t(bh * Tk * Dv)],
                 *g0 = &G[size_t(bh * Tq * Dv)];
    double *o0 = &r.out[size_t(bh * Tq * Dv)], *dq0 = &r.dq[size_t(bh * Tq * D)], *dk0 = &r.dk[size_t(bh * Tk * D)],
           *dv0 = &r.dv[size_t(bh * Tk * Dv)];
    for (int64_t i = 0; i < Tq; ++i) {
      int64_t seen = causal ? std::min(i + 1, Tk) : Tk;
      std::vector<double> p(static_cast<size_t>(seen)), dp(static_cast<size_t>(seen));
      double max = -INFINITY, z = 0, delta = 0;
      for (int64_t j = 0; j < seen; ++j) {
        double s = 0;
        for (int64_t d = 0; d < D; ++d) s += q0[i * D + d] * k0[j * D + d];
        p[size_t(j)] = s * scale;
        max = std::max(max, p[size_t(j)]);
      }
      for (double& x : p) z += (x = std::exp(x - max));
      for (double& x : p) x /= z;
      for (int64_t j = 0; j < seen; ++j)
        for (int64_t e = 0; e < Dv; ++e) {
          o0[i * Dv + e] += p[size_t(j)] * v0[j * Dv + e];
          dp[size_t(j)] += g0[i * Dv + e] * v0[j * Dv + e];
          dv0[j * Dv + e] += p[size_t(j)] * g0[i * Dv + e];
        }
      for (int64_t j = 0; j < seen; ++j) delta += p[size_t(j)] * dp[size_t(j)];
      for (int64_t j = 0; j < seen; ++j) {
        double ds = p[size_t(j)] * (dp[size_t(j)] - delta) * scale;
        for (int64_t d = 0; d < D; ++d) {
          dq0[i * D + d] += ds * k0[j * D + d];
          dk0[j * D + d] += ds * q0[i * D + d];
        }
      }
    }
  }
  return r;
}

}  // namespace kiln::test
