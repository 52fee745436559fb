// A tensor's stamp: which storage, at which version, read through which layout. Values computed
// from a tensor (a packed copy of a weight, a region's kept outputs) stay valid while the tensor
// still matches the stamp taken before they were computed: every kiln write (copy_, the
// optimizers, load_state_dict) bumps the storage's version. A write through data_ptr() does not.
#pragma once
#include <cstdint>
#include <memory>

#include "dsl/tensor.h"

namespace kiln {

struct TensorStamp {
  std::weak_ptr<Storage> storage;
  uint64_t version = 0;
  Shape shape;
  Strides strides;
  int64_t offset = 0;

  // t's stamp now (take it before computing from t: a write during the computation then shows).
  static TensorStamp of(const Tensor& t) {
    const TensorImpl& i = t.impl();
    return {i.storage, i.storage->version.load(), i.shape, i.strides, i.offset};
  }
  // Whether t is still the same tensor, unchanged, read through the same layout.
  bool matches(const Tensor& t) const {
    const TensorImpl& i = t.impl();
    return storage.lock() == i.storage && version == i.storage->version.load() && shape == i.shape &&
           strides == i.strides && offset == i.offset;
  }
};

}  // namespace kiln
