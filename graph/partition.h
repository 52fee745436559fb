// The forward/backward partition of a joint graph (graph/autodiff.h), as AOTAutograd does it: a
// minimum cut over bytes chooses which forward values the forward saves for the backward and
// which the backward computes again from them.
//
// The flow network has two nodes per forward value, in -> out, with the value's bytes as the
// capacity between them (cutting it = saving the value); data dependencies have infinite capacity;
// the forward inputs and every op that must not run twice hang from the source (random draws: they
// would draw new numbers; matmuls, reductions, normalizations and gathers that the forward's
// outputs need: expensive; one that only the backward needs runs once on either side; what a
// comparison reads: recomputed, it could round differently from the value it is compared with);
// every forward value a backward op reads hangs from the sink. The cut saves the fewest bytes;
// what lies on the sink side (cheap pointwise chains, views, constants) is recomputed in the
// backward graph. Forward inputs cost nothing to save: they are alive anyway. A view is never
// saved, its base is.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace kiln {

struct Partition {
  // Inputs: the joint's forward inputs. Outputs: the forward outputs, then the saved values that
  // are not forward inputs.
  std::shared_ptr<Graph> forward;
  // Inputs: the saved values (forward inputs keep their kind, the others are kind `saved`), then
  // the tangents. Outputs: the gradients, in JointLayout::grad_inputs order.
  std::shared_ptr<Graph> backward;
  // Per saved value (the backward's first inputs): the forward input it is, or -1 for the next
  // of the forward's extra outputs.
  std::vector<int> saved_from_input;
  int64_t saved_bytes = 0;   // the saved values that are not forward inputs
  int recomputed_ops = 0;    // forward ops the backward runs again
  std::string describe() const;  // for KILN_LOGS=partition
};

Partition partition_joint(const Graph& joint);

// The bytes the eager tape would keep alive for a forward graph: every value (not a graph input,
// not a view) that an op recording autograd takes or makes. Run it on the captured graph, before
// decompositions split ops into the primitives eager never records.
int64_t eager_tape_bytes(const Graph& g);

}  // namespace kiln
