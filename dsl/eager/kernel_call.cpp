#include "dsl/eager/kernel_call.h"

#include <HalideRuntimeCuda.h>

#include <algorithm>
#include <climits>
#include <mutex>
#include <unordered_map>

#include "dsl/error.h"

namespace kiln {

namespace {

thread_local std::string last_halide_error;

struct Canonical {
  std::vector<int64_t> extents;               // innermost first
  std::vector<std::vector<int64_t>> strides;  // per operand, innermost first
};

// Drops size-1 dims and merges dims that all operands walk contiguously.
Canonical canonicalize(const Shape& shape, const std::vector<const Strides*>& operand_strides) {
  Canonical c;
  size_t n = operand_strides.size();
  c.strides.resize(n);
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] == 1) continue;
    bool merge = !c.extents.empty();
    for (size_t k = 0; k < n && merge; ++k)
      merge = (*operand_strides[k])[d] == c.strides[k].back() * c.extents.back();
    if (merge) {
      c.extents.back() *= shape[d];
    } else {
      c.extents.push_back(shape[d]);
      for (size_t k = 0; k < n; ++k) c.strides[k].push_back((*operand_strides[k])[d]);
    }
  }
  return c;
}

using KernelIndex = std::unordered_map<std::string_view, KernelFn>;

KernelIndex make_index(std::span<const KernelEntry> table) {
  KernelIndex m;
  for (const KernelEntry& e : table) m.emplace(e.name, e.fn);
  return m;
}

thread_local bool kernel_device_cuda = false;

}  // namespace

KernelDeviceScope::KernelDeviceScope(bool cuda) : saved_(kernel_device_cuda) { kernel_device_cuda = cuda; }
KernelDeviceScope::~KernelDeviceScope() { kernel_device_cuda = saved_; }

KernelFn find_kernel(std::string_view name) {
  static const KernelIndex cpu = make_index(eager_kernel_table());
  static const KernelIndex cuda = make_index(eager_cuda_kernel_table());
  const KernelIndex& index = kernel_device_cuda ? cuda : cpu;
  auto it = index.find(name);
  return it == index.end() ? nullptr : it->second;
}

KernelFn require_kernel(const std::string& name, std::string_view op) {
  KernelFn fn = find_kernel(name);
  KILN_CHECK(fn, op, ": no eager ", kernel_device_cuda ? "CUDA" : "CPU", " kernel '", name,
             "' was built (the op does not support this dtype", kernel_device_cuda ? " on CUDA" : "", ")");
  return fn;
}

KernelBuffer::KernelBuffer(const Tensor& t, const std::vector<int64_t>& extents,
                           const std::vector<int64_t>& strides, int64_t extra_offset) {
  KILN_CHECK(extents.size() <= 8, "kernel call: rank ", extents.size(), " above 8");
  uint8_t* data = static_cast<uint8_t*>(t.data_ptr()) + extra_offset * int64_t(itemsize(t.dtype()));
  if (t.device().is_cuda()) {  // a device allocation, already up to date: Halide copies nothing
    buf.device = reinterpret_cast<uint64_t>(data);
    buf.device_interface = halide_cuda_device_interface();
  } else {
    buf.host = data;
  }
  buf.dimensions = int32_t(extents.size());
  buf.dim = dims;
  buf.type = halide_buffer_type(t.dtype());
  for (size_t i = 0; i < extents.size(); ++i) {
    KILN_CHECK(extents[i] <= INT_MAX && std::abs(strides[i]) <= INT_MAX && extents[i] * std::abs(strides[i]) <= INT_MAX,
               "kernel call: tensors of 2^31 or more elements per dim are not supported by the "
               "eager kernels (Halide indexes with 32-bit integers); extent ", extents[i]);
    dims[i] = halide_dimension_t(0, int32_t(extents[i]), int32_t(strides[i]));
  }
}

void capture_halide_error(void*, const char* message) { last_halide_error += message; }

int call_halide(KernelFn fn, void** args, std::string& message) {
  static std::once_flag once;
  std::call_once(once, [] { halide_set_error_handler(&capture_halide_error); });
  last_halide_error.clear();
  int rc = fn(args);
  if (rc != 0) message = last_halide_error;
  return rc;
}

void call_kernel(KernelFn fn, std::vector<void*> args, std::string_view what) {
  std::string message;
  int rc = call_halide(fn, args.data(), message);
  if (rc != 0) throw_error(what, ": kernel failed (Halide error ", rc, "): ", message);
}

void run_pointwise_kernel(KernelFn fn, const std::vector<Tensor>& ins, const Tensor& out,
                          std::string_view op) {
  if (out.numel() == 0) return;
  std::vector<const Strides*> st{&out.strides()};
  for (const Tensor& t : ins) st.push_back(&t.strides());
  Canonical c = canonicalize(out.shape(), st);
  if (c.extents.empty()) {  // one element
    c.extents.push_back(1);
    for (auto& s : c.strides) s.push_back(0);
  }
  // Dims above the kernel rank become host loops over offsets.
  size_t rank = c.extents.size();
  size_t kernel_rank = std::min<size_t>(rank, kMaxKernelRank);
  std::vector<int64_t> outer_ext(c.extents.begin() + kernel_rank, c.extents.end());
  std::vector<int64_t> ext(c.extents.begin(), c.extents.begin() + kernel_rank);
  ext.resize(kMaxKernelRank, 1);
  std::vector<int64_t> counter(outer_ext.size(), 0);
  int64_t outer_total = 1;
  for (int64_t e : outer_ext) outer_total *= e;
  for (int64_t it = 0; it < outer_total; ++it) {
    std::vector<std::unique_ptr<KernelBuffer>> bufs;
    std::vector<void*> args;
    for (size_t k = 0; k < st.size(); ++k) {
      std::vector<int64_t> s(c.strides[k].begin(), c.strides[k].begin() + kernel_rank);
      s.resize(kMaxKernelRank, 0);
      int64_t off = 0;
      for (size_t j = 0; j < counter.size(); ++j) off += counter[j] * c.strides[k][kernel_rank + j];
      const Tensor& t = k == 0 ? out : ins[k - 1];
      bufs.push_back(std::make_unique<KernelBuffer>(t, ext, s, off));
    }
    for (size_t k = 1; k < bufs.size(); ++k) args.push_back(&bufs[k]->buf);
    args.push_back(&bufs[0]->buf);
    call_kernel(fn, args, op);
    for (size_t j = 0; j < counter.size() && ++counter[j] == outer_ext[j]; ++j) counter[j] = 0;
  }
}

}  // namespace kiln
