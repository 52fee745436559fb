// Tensor: a view (shape, strides in elements, offset) of a shared Storage, with a dtype and a
// device. Views share storage and never copy; ops return new tensors.
//
//   Tensor x = randn({64, 128});
//   Tensor y = x.transpose(0, 1).contiguous();   // a copy in the new layout
//   float v = y.sum().item<float>();
#pragma once
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <source_location>
#include <string>
#include <string_view>
#include <vector>

#include "dsl/device.h"
#include "dsl/dtype.h"
#include "dsl/shape.h"
#include "dsl/storage.h"

namespace kiln {

struct AutogradMeta;  // autograd/
class TracedGradHooks;  // dsl/traced_grad_hooks.h
struct TracedValue;   // graph/: the graph value a symbolic tensor stands for

using SourceLocation = std::source_location;

struct TensorOptions {
  DType dtype = DType::f32;
  Device device = Device::cpu();
};

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  int64_t offset = 0;
  Shape shape;
  Strides strides;
  DType dtype = DType::f32;
  std::shared_ptr<AutogradMeta> autograd;  // grad, backward node; owned by autograd/
  // Set while graph/ traces a function and this tensor is one of its symbolic values: it has
  // metadata but no data yet (dsl/trace_hooks.h says what happens when its data is needed).
  std::shared_ptr<TracedValue> traced;
  // mark_dynamic / mark_static (graph/compile.h): bit d set for dim d.
  uint64_t marked_dynamic = 0, marked_static = 0;
};

// Removes a grad-ready hook (Tensor::on_grad_ready). remove() is harmless twice, or once the
// tensor is gone; dropping the handle keeps the hook.
class GradHookHandle {
 public:
  GradHookHandle() = default;
  GradHookHandle(std::weak_ptr<TensorImpl> tensor, uint64_t id) : tensor_(std::move(tensor)), id_(id) {}
  void remove();  // defined in autograd/

 private:
  std::weak_ptr<TensorImpl> tensor_;
  uint64_t id_ = 0;
};

class Tensor {
 public:
  Tensor() = default;  // undefined: defined() is false
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // A new contiguous tensor with uninitialised contents.
  static Tensor empty(const Shape& shape, TensorOptions opts = {});
  // A view of `storage` (no copy).
  static Tensor make_view(std::shared_ptr<Storage> storage, Shape shape, Strides strides,
                          int64_t offset, DType dtype);
  // A new tensor object over the same memory, shape, strides and dtype, with no autograd history
  // and not traced (what the tape saves, and what detach() is outside a trace).
  Tensor alias() const { return make_view(storage(), impl().shape, impl().strides, storage_offset(), dtype()); }

  bool defined() const { return impl_ != nullptr; }
  // Symbolic: a value of a function being traced by kiln::compile (no data until it is needed).
  bool is_traced() const { return impl_ && impl_->traced; }
  int64_t dim() const { return int64_t(impl().shape.size()); }
  // Size reads. On a symbolic tensor they tell the tracer, which then guards on the sizes read
  // (host code may compute with them); `where` is the caller's line for that guard's log.
  const Shape& shape(SourceLocation where = SourceLocation::current()) const {
    if (impl().traced) [[unlikely]] note_size_read(-1, where);
    return impl_->shape;
  }
  const Shape& sizes(SourceLocation where = SourceLocation::current()) const { return shape(where); }
  int64_t size(int64_t d, SourceLocation where = SourceLocation::current()) const;
  const Strides& strides(SourceLocation where = SourceLocation::current()) const {
    if (impl().traced) [[unlikely]] note_size_read(-1, where);
    return impl_->strides;
  }
  int64_t stride(int64_t d, SourceLocation where = SourceLocation::current()) const;
  int64_t storage_offset() const { return impl().offset; }
  int64_t numel(SourceLocation where = SourceLocation::current()) const { return kiln::numel(shape(where)); }
  DType dtype() const { return impl().dtype; }
  Device device() const { return impl().storage->device; }
  TensorOptions options() const { return {dtype(), device()}; }
  bool is_contiguous() const { return kiln::is_contiguous(impl().shape, impl().strides); }
  const std::shared_ptr<Storage>& storage() const { return impl().storage; }
  bool shares_storage_with(const Tensor& other) const { return storage() == other.storage(); }

  // Address of the first element (after the offset).
  void* data_ptr(SourceLocation where = SourceLocation::current()) const;
  template <typename T> T* data(SourceLocation where = SourceLocation::current()) const;  // checks the dtype

  // Host reads: the value of a one-element tensor, or all values in row-major order. Inside a
  // compiled function these are graph breaks, reported with the caller's line.
  template <typename T> T item(SourceLocation where = SourceLocation::current()) const;
  template <typename T> std::vector<T> to_vector(SourceLocation where = SourceLocation::current()) const;
  // A branch on a tensor's value: true when the one-element tensor is nonzero (a graph break).
  bool is_nonzero(SourceLocation where = SourceLocation::current()) const;

  // Writes src (broadcast to this shape, converted to this dtype) into this tensor's memory and
  // bumps the storage version, so autograd notices saved tensors that changed. Not recorded by
  // autograd itself: use it on detached tensors (optimizer updates, initialisation).
  Tensor& copy_(const Tensor& src, SourceLocation where = SourceLocation::current());

  Tensor to(DType t) const;
  Tensor to(Device d) const;
  Tensor contiguous() const;
  Tensor clone() const;

  // Views (metadata only).
  Tensor reshape(const Shape& shape) const;  // a view when the layout allows, else a copy
  Tensor view(const Shape& shape) const;     // always a view; errors when the layout forbids it
  Tensor permute(const std::vector<int64_t>& dims) const;
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor t() const;  // transpose of a 2-D tensor
  Tensor expand(const Shape& shape) const;
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor unflatten(int64_t dim, const Shape& sizes) const;

  // Reductions (an empty dim list reduces all dims).
  Tensor sum(const std::vector<int64_t>& dims = {}, bool keepdim = false) const;
  Tensor mean(const std::vector<int64_t>& dims = {}, bool keepdim = false) const;
  Tensor max(const std::vector<int64_t>& dims = {}, bool keepdim = false) const;
  Tensor min(const std::vector<int64_t>& dims = {}, bool keepdim = false) const;
  Tensor argmax(int64_t dim, bool keepdim = false) const;
  Tensor var(const std::vector<int64_t>& dims = {}, int64_t correction = 1, bool keepdim = false) const;
  Tensor logsumexp(const std::vector<int64_t>& dims, bool keepdim = false) const;

  std::string str(SourceLocation where = SourceLocation::current()) const;  // shape, dtype, small tensors' values

  // Autograd (defined in autograd/): leaves that require grad collect gradients in grad() when
  // backward() runs from a result computed from them.
  bool requires_grad() const;
  Tensor& requires_grad_(bool on = true);
  Tensor grad() const;               // undefined until a backward reaches this leaf
  void set_grad(const Tensor& g) const;  // replace (or, with an undefined tensor, clear) grad()
  bool is_leaf() const;              // no backward node: created by the user, not by an op
  Tensor detach() const;             // same storage, outside autograd
  std::string grad_fn_name() const;  // "MulBackward", or "" for leaves
  // Backward from this tensor: a scalar, or any shape with `gradient` of the same shape.
  // create_graph (a differentiable backward, for higher-order gradients) is refused with a
  // kiln::Error naming the node that cannot be differentiated.
  void backward(const Tensor& gradient = Tensor(), bool retain_graph = false, bool create_graph = false,
                SourceLocation where = SourceLocation::current()) const;
  // Calls hook(leaf) in every backward pass that reaches this leaf, once the pass has summed the
  // last of its gradient into grad() (a hook on a leaf used twice runs once, after both); other
  // leaves' gradients may still be coming. DistributedDataParallel starts its all-reduces from
  // it. Only leaves that require grad take hooks; a compiled function whose trace reaches a
  // backward over such a leaf runs that backward eagerly (a graph break), so the hooks run,
  // unless the hook comes with `traced`: what a compiled backward traces instead
  // (dsl/traced_grad_hooks.h), used while this hook is the leaf's only one. The handle removes
  // the hook (as the handle PyTorch's register_hook returns).
  GradHookHandle on_grad_ready(std::function<void(const Tensor&)> hook,
                               std::shared_ptr<TracedGradHooks> traced = nullptr) const;
  bool has_grad_ready_hooks() const;
  // The traced form of the leaf's hooks: that of its one hook; null with none, with several or
  // with one that has none.
  std::shared_ptr<TracedGradHooks> traced_grad_hooks() const;

  TensorImpl& impl() const;
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }

 private:
  void note_size_read(int64_t dim, const SourceLocation& where) const;
  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

// Inside a backward pass (a grad-ready hook, a derivative rule): runs fn once the pass ends, after
// every node and hook (DistributedDataParallel waits for its all-reduces there). Outside one: a
// kiln::Error. Defined in autograd/.
void queue_backward_callback(std::function<void()> fn);

// Tensors ride on the calling convention of ops as lists.
using TensorList = std::vector<Tensor>;

}  // namespace kiln
