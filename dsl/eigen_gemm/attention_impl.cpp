// One instruction-set build of the fused attention kernel behind dsl/eager/attention.h (the
// formulas are in dsl/eager/attention_kernel.h). Built like eigen_gemm_impl.cpp: once per ISA, with
// Eigen's namespace renamed, and nothing included that defines inline code shared with the rest of
// kiln (log goes through the compiler builtin, not <cmath>). Each call does heads [first, last)
// of the flattened (batch, head) range on the calling thread.
#include <Eigen/Core>

#include "dsl/eager/attention_kernel.h"

#define KILN_CONCAT2(a, b) a##_##b
#define KILN_CONCAT(a, b) KILN_CONCAT2(a, b)

namespace kiln::attention_detail {

namespace {

using Eigen::Dynamic;
using Eigen::OuterStride;
template <typename T>
using Rows = Eigen::Matrix<T, Dynamic, Dynamic, Eigen::RowMajor>;
template <typename T>
using In = Eigen::Map<const Rows<T>, Eigen::Unaligned, OuterStride<>>;
template <typename T>
using Out = Eigen::Map<Rows<T>, Eigen::Unaligned, OuterStride<>>;
template <typename T>
using Column = Eigen::Matrix<T, Dynamic, 1>;

inline float log_of(float x) { return __builtin_logf(x); }
inline double log_of(double x) { return __builtin_log(x); }

// Head (b, h) of a [batch, heads, rows, cols] operand.
template <typename T>
In<T> in_head(const void* p, const AttentionLayout& at, int64_t b, int64_t h, int64_t rows, int64_t cols) {
  return In<T>(static_cast<const T*>(p) + b * at.batch + h * at.head, rows, cols, OuterStride<>(at.row));
}
template <typename T>
Out<T> out_head(void* p, const AttentionLayout& at, int64_t b, int64_t h, int64_t rows, int64_t cols) {
  return Out<T>(static_cast<T*>(p) + b * at.batch + h * at.head, rows, cols, OuterStride<>(at.row));
}

// Keys [0, cols) that the query block starting at row r0 (of `rows` rows) reads.
int64_t block_keys(const AttentionProblem& p, int64_t r0, int64_t rows) {
  return p.causal ? (r0 + rows < p.kv_len ? r0 + rows : p.kv_len) : p.kv_len;
}
// Keys that query row r reads, of the block's `cols`.
int64_t row_keys(const AttentionProblem& p, int64_t r, int64_t cols) {
  return p.causal ? (r + 1 < cols ? r + 1 : cols) : cols;
}

// The inputs both passes read, for pair bh of the flattened (batch, head) range.
template <typename T>
struct Head {
  int64_t b, h;
  In<T> q, k, v;
  Head(const AttentionProblem& p, const AttentionOperands& o, int64_t bh)
      : b(bh / p.heads),
        h(bh % p.heads),
        q(in_head<T>(o.q, o.q_at, b, h, p.q_len, p.head_dim)),
        k(in_head<T>(o.k, o.k_at, b, h, p.kv_len, p.head_dim)),
        v(in_head<T>(o.v, o.v_at, b, h, p.kv_len, p.value_dim)) {}
};

template <typename T>
void forward(const AttentionProblem& p, const AttentionOperands& o, int64_t first, int64_t last) {
  Rows<T> s, kd, vd;
  const T scale = T(p.scale);
  for (int64_t bh = first; bh < last; ++bh) {
    const Head<T> x(p, o, bh);
    const int64_t b = x.b, h = x.h;
    const In<T>& q = x.q;
    Out<T> out = out_head<T>(o.out, o.out_at, b, h, p.q_len, p.value_dim);
    kd = x.k, vd = x.v;  // dense: every block reads them again
    T* lse = static_cast<T*>(o.lse) + b * o.lse_at.batch + h * o.lse_at.head;
    for (int64_t r0 = 0; r0 < p.q_len; r0 += kAttentionBlock) {
      const int64_t rows = p.q_len - r0 < kAttentionBlock ? p.q_len - r0 : kAttentionBlock;
      const int64_t cols = block_keys(p, r0, rows);
      s.resize(rows, cols);
      s.noalias() = q.middleRows(r0, rows) * kd.topRows(cols).transpose();
      for (int64_t i = 0; i < rows; ++i) {
        const int64_t seen = row_keys(p, r0 + i, cols);
        auto row = s.row(i).head(seen);
        row *= scale;
        const T max = row.maxCoeff();
        row = (row.array() - max).exp();
        const T sum = row.sum();
        row *= T(1) / sum;
        s.row(i).tail(cols - seen).setZero();
        lse[(r0 + i) * o.lse_at.row] = max + log_of(sum);
      }
      out.middleRows(r0, rows).noalias() = s * vd.topRows(cols);
    }
  }
}

template <typename T>
void backward(const AttentionProblem& p, const AttentionOperands& o, int64_t first, int64_t last) {
  Rows<T> s, ds, dk, dv;
  Column<T> delta;
  const T scale = T(p.scale);
  for (int64_t bh = first; bh < last; ++bh) {
    const Head<T> x(p, o, bh);
    const int64_t b = x.b, h = x.h;
    const In<T> &q = x.q, &k = x.k, &v = x.v;
    In<T> out = in_head<T>(o.out, o.out_at, b, h, p.q_len, p.value_dim);
    In<T> dout = in_head<T>(o.grad_out, o.grad_out_at, b, h, p.q_len, p.value_dim);
    Out<T> dq = out_head<T>(o.grad_q, o.grad_q_at, b, h, p.q_len, p.head_dim);
    const T* lse = static_cast<const T*>(o.lse) + b * o.lse_at.batch + h * o.lse_at.head;
    dk.setZero(p.kv_len, p.head_dim);
    dv.setZero(p.kv_len, p.value_dim);
    for (int64_t r0 = 0; r0 < p.q_len; r0 += kAttentionBlock) {
      const int64_t rows = p.q_len - r0 < kAttentionBlock ? p.q_len - r0 : kAttentionBlock;
      const int64_t cols = block_keys(p, r0, rows);
      auto qb = q.middleRows(r0, rows);
      auto doutb = dout.middleRows(r0, rows);
      s.resize(rows, cols);
      s.noalias() = qb * k.topRows(cols).transpose();
      for (int64_t i = 0; i < rows; ++i) {  // the probabilities again, from the saved log-sum-exp
        const int64_t seen = row_keys(p, r0 + i, cols);
        auto row = s.row(i).head(seen);
        row = (row.array() * scale - lse[(r0 + i) * o.lse_at.row]).exp();
        s.row(i).tail(cols - seen).setZero();
      }
      delta = doutb.cwiseProduct(out.middleRows(r0, rows)).rowwise().sum();
      ds.resize(rows, cols);
      ds.noalias() = doutb * v.topRows(cols).transpose();
      ds.array() = s.array() * (ds.array().colwise() - delta.array()) * scale;
      dv.topRows(cols).noalias() += s.transpose() * doutb;
      dq.middleRows(r0, rows).noalias() = ds * k.topRows(cols);
      dk.topRows(cols).noalias() += ds.transpose() * qb;
    }
    out_head<T>(o.grad_k, o.grad_k_at, b, h, p.kv_len, p.head_dim) = dk;
    out_head<T>(o.grad_v, o.grad_v_at, b, h, p.kv_len, p.value_dim) = dv;
  }
}

}  // namespace

#define KILN_DEFINE_ATTENTION(T, suffix)                                                                     \
  void KILN_CONCAT(forward_##suffix, KILN_EIGEN_ISA)(const AttentionProblem& p, const AttentionOperands& o, \
                                                     int64_t first, int64_t last) {                        \
    forward<T>(p, o, first, last);                                                                           \
  }                                                                                                          \
  void KILN_CONCAT(backward_##suffix, KILN_EIGEN_ISA)(const AttentionProblem& p, const AttentionOperands& o, \
                                                      int64_t first, int64_t last) {                       \
    backward<T>(p, o, first, last);                                                                          \
  }
KILN_DEFINE_ATTENTION(float, f32)
KILN_DEFINE_ATTENTION(double, f64)
#undef KILN_DEFINE_ATTENTION

}  // namespace kiln::attention_detail
