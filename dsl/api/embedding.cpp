// embedding(weight, indices): rows of a (num_embeddings, dim) table picked by integer indices.
#include "dsl/dispatch.h"
#include "dsl/functions.h"

namespace kiln {

Tensor embedding(const Tensor& weight, const Tensor& indices) {
  static const OpDef& d = op_def("embedding");
  return dispatch(d, {weight, indices})[0];
}

}  // namespace kiln
