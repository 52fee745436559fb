#include "dsl/tensor.h"

#include <ostream>
#include <cstring>
#include <sstream>

#include "dsl/cuda/cuda_context.h"
#include "dsl/dispatch.h"
#include "dsl/eager/runners.h"
#include "dsl/error.h"
#include "dsl/functions.h"
#include "dsl/kernel_table.h"
#include "dsl/trace_hooks.h"

namespace kiln {

Tensor Tensor::empty(const Shape& shape, TensorOptions opts) {
  for (int64_t d : shape)
    KILN_CHECK(d >= 0, "empty: negative size in shape ", to_string(shape));
  auto impl = std::make_shared<TensorImpl>();
  try {
    impl->storage = Storage::allocate(size_t(kiln::numel(shape)) * itemsize(opts.dtype), opts.device);
  } catch (const Error& e) {
    throw_error("empty: cannot allocate a tensor of shape ", to_string(shape), " (", opts.dtype, ") on ",
                opts.device, ": ", e.what());
  }
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = opts.dtype;
  return Tensor(std::move(impl));
}

Tensor Tensor::make_view(std::shared_ptr<Storage> storage, Shape shape, Strides strides,
                         int64_t offset, DType dtype) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::move(storage);
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

TensorImpl& Tensor::impl() const {
  KILN_CHECK(impl_, "tensor: use of an undefined tensor");
  return *impl_;
}

int64_t Tensor::size(int64_t d, SourceLocation where) const {
  int w = wrap_dim("size", d, dim());
  if (impl().traced) [[unlikely]] note_size_read(w, where);
  return impl_->shape[w];
}
int64_t Tensor::stride(int64_t d, SourceLocation where) const { return strides(where)[wrap_dim("stride", d, dim())]; }

void* Tensor::data_ptr(SourceLocation where) const {
  if (impl().traced) [[unlikely]] materialize(*this, "data_ptr(): raw access to the data", where);
  return static_cast<uint8_t*>(impl().storage->data) + impl().offset * int64_t(itemsize(dtype()));
}

template <typename T>
T* Tensor::data(SourceLocation where) const {
  if (impl().traced) [[unlikely]] materialize(*this, "data<T>(): raw access to the data", where);
  KILN_CHECK(dtype_of<T>() == dtype(), "data<T>: tensor has dtype ", dtype(), ", asked for ", dtype_of<T>());
  KILN_CHECK(device().is_cpu(), "data<T>: tensor is on ", device(), "; move it with to(Device::cpu())");
  return static_cast<T*>(data_ptr());
}

namespace {

template <typename T>
T from_double(double v) {
  if constexpr (std::is_same_v<T, Half>) return Half{float_to_half(float(v))};
  else if constexpr (std::is_same_v<T, BFloat16>) return BFloat16{float_to_bfloat16(float(v))};
  else if constexpr (std::is_same_v<T, bool>) return v != 0;
  else return static_cast<T>(v);
}

}  // namespace

template <typename T>
std::vector<T> Tensor::to_vector(SourceLocation where) const {
  materialize(*this, "to_vector(): the values are read on the host", where);
  Tensor c = to(Device::cpu()).contiguous();
  std::vector<T> out(size_t(c.numel()));
  const void* p = c.data_ptr();
  if constexpr (!std::is_same_v<T, bool>) {
    if (c.dtype() == dtype_of<T>() && !out.empty()) {
      std::memcpy(static_cast<void*>(out.data()), p, out.size() * sizeof(T));
      return out;
    }
  }
  for (size_t i = 0; i < out.size(); ++i) {
    if constexpr (std::is_same_v<T, int64_t>) {  // exact for large i64 values
      if (c.dtype() == DType::i64) { out[i] = static_cast<const int64_t*>(p)[i]; continue; }
    }
    out[i] = from_double<T>(load_as_double(p, c.dtype(), int64_t(i)));
  }
  return out;
}

template <typename T>
T Tensor::item(SourceLocation where) const {
  materialize(*this, "item(): the value is read on the host", where);
  KILN_CHECK(numel() == 1, "item: tensor of shape ", to_string(shape()), " has ", numel(),
             " elements; item() needs exactly one");
  return to_vector<T>()[0];
}

#define KILN_INSTANTIATE(T)                            \
  template T* Tensor::data<T>(SourceLocation) const;                 \
  template T Tensor::item<T>(SourceLocation) const;                  \
  template std::vector<T> Tensor::to_vector<T>(SourceLocation) const;
KILN_INSTANTIATE(float)
KILN_INSTANTIATE(double)
KILN_INSTANTIATE(int32_t)
KILN_INSTANTIATE(int64_t)
KILN_INSTANTIATE(Half)
KILN_INSTANTIATE(BFloat16)
#undef KILN_INSTANTIATE
template bool Tensor::item<bool>(SourceLocation) const;
template std::vector<bool> Tensor::to_vector<bool>(SourceLocation) const;
template bool* Tensor::data<bool>(SourceLocation) const;

bool Tensor::is_nonzero(SourceLocation where) const {
  materialize(*this, "is_nonzero(): a branch on a tensor's value", where);
  KILN_CHECK(numel() == 1, "is_nonzero: a tensor of shape ", to_string(shape()), " has ", numel(),
             " elements; a branch needs exactly one (reduce it first, e.g. with max())");
  return item<double>() != 0;
}

Tensor& Tensor::copy_(const Tensor& src, SourceLocation where) {
  if (trace_hooks().write && trace_hooks().write(*this, src, where)) return *this;
  materialize(*this, "copy_(): an in-place write", where);
  materialize(src, "copy_(): an in-place write", where);
  Shape b = broadcast_shapes("copy_", src.shape(), shape());
  KILN_CHECK(b == shape(), "copy_: source of shape ", to_string(src.shape()), " does not broadcast to ",
             to_string(shape()));
  Tensor s = src.dtype() == dtype() ? src : src.to(dtype());
  KILN_CHECK(s.device() == device(), "copy_: source on ", s.device(), ", destination on ", device(),
             "; move the source with to(Device) first");
  const TensorImpl &d = impl(), &from = s.impl();
  bool same_elements = from.storage == d.storage && from.offset == d.offset && from.shape == d.shape &&
                       from.strides == d.strides;  // a value already computed in place (a compiled write)
  if (!same_elements) {
    KernelDeviceScope kernels(device().is_cuda());
    copy_into(*this, broadcast_to_view(s, shape()));
  }
  storage()->written();
  return *this;
}

// As in PyTorch, the tensor itself when it already has the dtype (no copy, no graph node).
Tensor Tensor::to(DType t) const { return t == dtype() ? *this : kiln::cast(*this, t); }

Tensor Tensor::to(Device d) const {
  if (d == device()) return *this;
  KILN_CHECK(!(d.is_cuda() && device().is_cuda()), "to: copies between CUDA devices (", device(), " to ", d,
             ") are not supported; go through the CPU");
  Tensor src = contiguous();
  Tensor dst;
  try {
    dst = Tensor::empty(shape(), {dtype(), d});
  } catch (const Error& e) {
    throw_error("to: cannot move a tensor of shape ", to_string(shape()), " (", dtype(), ") from ", device(),
                " to ", d, ": ", e.what());
  }
  size_t nbytes = size_t(numel()) * itemsize(dtype());
  if (nbytes == 0) return dst;
  if (d.is_cuda())
    cuda_copy_to_device(reinterpret_cast<CUdeviceptr>(dst.data_ptr()), src.data_ptr(), nbytes, d.index);
  else
    cuda_copy_to_host(dst.data_ptr(), reinterpret_cast<CUdeviceptr>(src.data_ptr()), nbytes, device().index);
  return dst;
}

Tensor Tensor::contiguous() const { return is_contiguous() ? *this : kiln::contiguous(*this); }
Tensor Tensor::clone() const { return kiln::contiguous(*this); }

Tensor Tensor::reshape(const Shape& s) const { return kiln::reshape(*this, s); }
Tensor Tensor::view(const Shape& s) const { return kiln::view(*this, s); }
Tensor Tensor::permute(const std::vector<int64_t>& dims) const { return kiln::permute(*this, dims); }
Tensor Tensor::transpose(int64_t d0, int64_t d1) const { return kiln::transpose(*this, d0, d1); }
Tensor Tensor::t() const {
  KILN_CHECK(dim() <= 2, "t: expects a tensor of rank <= 2, got shape ", to_string(shape()));
  return dim() < 2 ? *this : transpose(0, 1);
}
Tensor Tensor::expand(const Shape& s) const { return kiln::expand(*this, s); }
Tensor Tensor::squeeze() const { return kiln::squeeze(*this); }
Tensor Tensor::squeeze(int64_t d) const { return kiln::squeeze(*this, d); }
Tensor Tensor::unsqueeze(int64_t d) const { return kiln::unsqueeze(*this, d); }
Tensor Tensor::slice(int64_t d, int64_t start, int64_t end, int64_t step) const {
  return kiln::slice(*this, d, start, end, step);
}
Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  return kiln::narrow(*this, d, start, length);
}
Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const { return kiln::flatten(*this, start_dim, end_dim); }
Tensor Tensor::unflatten(int64_t d, const Shape& sizes) const { return kiln::unflatten(*this, d, sizes); }

std::string Tensor::str(SourceLocation where) const {
  std::ostringstream os;
  if (!defined()) return "Tensor(undefined)";
  materialize(*this, "str(): printing a tensor's values", where);
  os << "Tensor(shape=" << to_string(shape()) << ", dtype=" << dtype() << ", device=" << device();
  if (numel() <= 16 && device().is_cpu()) {
    os << ", values=[";
    std::vector<double> v = to_vector<double>();
    for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
    os << ']';
  }
  return os.str() + ")";
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.str(); }

}  // namespace kiln
