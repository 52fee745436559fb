#include "dsl/distributed/functional.h"

#include <map>
#include <mutex>

#include "dsl/custom_op.h"
#include "dsl/error.h"

namespace kiln::distributed {

namespace {

// All-reduces started and not yet waited for, by the data pointer of the tensor that receives the
// result. `owner` holds that memory (the Work holds it too) while it is written; the tensor start
// gives out is a second handle on it (its own Storage, which keeps owner's alive), and
// `returned` watches that handle. Once it is gone, with every view of it, and no wait came (a
// step threw between the two), nobody can wait for the entry: the next start waits for its
// all-reduce and lets it go, so a failed step leaks nothing.
struct Pending {
  Work work;
  Tensor owner;
  std::weak_ptr<Storage> returned;
};

struct Registry {
  std::mutex mu;
  std::map<const void*, Pending> pending;
  std::map<int64_t, int64_t> started;  // by tag

  // Drops the entries whose returned tensor is gone, once their all-reduce is done. Its error,
  // if any, is not lost: the group's later collectives report the broken group.
  void drop_abandoned() {
    for (auto it = pending.begin(); it != pending.end();) {
      if (!it->second.returned.expired()) {
        ++it;
        continue;
      }
      try {
        it->second.work.wait();
      } catch (const Error&) {
      }
      it = pending.erase(it);
    }
  }
};

// Never destroyed: an entry left at exit must not run CUDA calls during the process's static
// destruction.
Registry& registry() {
  static Registry* r = new Registry;
  return *r;
}

ReduceOp reduce_op(const Attrs& a) {
  int64_t op = a.get<int64_t>("op");
  KILN_CHECK(op >= 0 && op <= int64_t(ReduceOp::min), "distributed::all_reduce_start: no reduction ", op);
  return ReduceOp(op);
}

TensorList start_kernel(const TensorList& in, const Attrs& a) {
  ProcessGroup& group = group_with_id(a.get<int64_t>("group"));
  Tensor owner = in[0].clone();
  auto handle = std::make_shared<Storage>(owner.data_ptr(), owner.storage()->nbytes, owner.device(), nullptr);
  handle->base = owner.storage();
  Tensor result = Tensor::make_view(handle, owner.shape(), owner.strides(), 0, owner.dtype());
  Registry& r = registry();
  {
    std::lock_guard<std::mutex> lock(r.mu);
    r.drop_abandoned();
  }
  Work work = a.get<bool>("checked") ? group.all_reduce_async(owner, reduce_op(a))
                                     : group.all_reduce_unchecked_async(owner, reduce_op(a));
  std::lock_guard<std::mutex> lock(r.mu);
  r.pending[result.data_ptr()] = {work, owner, handle};
  ++r.started[a.get<int64_t>("tag")];
  return {result};
}

// "shapes": each shape's rank, then its sizes.
std::vector<Shape> decode_shapes(const Attrs& a) {
  const std::vector<int64_t>& v = a.get<std::vector<int64_t>>("shapes");
  std::vector<Shape> out;
  for (size_t i = 0; i < v.size();) {
    int64_t rank = v[i++];
    KILN_CHECK(rank >= 0 && i + size_t(rank) <= v.size(), "distributed::all_reduce_wait: malformed shapes attribute");
    out.emplace_back(v.begin() + int64_t(i), v.begin() + int64_t(i) + rank);
    i += size_t(rank);
  }
  return out;
}

std::vector<int64_t> encode_shapes(const std::vector<Shape>& shapes) {
  std::vector<int64_t> v;
  for (const Shape& s : shapes) {
    v.push_back(int64_t(s.size()));
    v.insert(v.end(), s.begin(), s.end());
  }
  return v;
}

std::vector<TensorMeta> wait_shapes(const std::vector<TensorMeta>& in, const Attrs& a) {
  std::vector<Shape> shapes = decode_shapes(a);
  KILN_CHECK(!shapes.empty(), "distributed::all_reduce_wait: no output shapes");
  int64_t total = 0;
  std::vector<TensorMeta> out;
  for (const Shape& s : shapes) {
    total += numel(s);
    out.push_back({s, in[0].dtype, in[0].device});
  }
  KILN_CHECK(total == numel(in[0].shape), "distributed::all_reduce_wait: the output shapes hold ", total,
             " elements, the all-reduced tensor ", to_string(in[0]));
  return out;
}

TensorList wait_kernel(const TensorList& in, const Attrs& a) {
  Pending p;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.pending.find(in[0].data_ptr());
    KILN_CHECK(it != r.pending.end(), "distributed::all_reduce_wait: its input (", in[0].dtype(), to_string(in[0].shape()),
               ") is not an all-reduce in flight: pass the tensor all_reduce_start returned, once");
    p = std::move(it->second);
    r.pending.erase(it);
  }
  p.work.wait();
  Tensor flat = p.owner.reshape({p.owner.numel()});
  TensorList out;
  int64_t at = 0;
  for (const Shape& s : decode_shapes(a)) {
    out.push_back(flat.narrow(0, at, numel(s)).reshape(s));  // views of one buffer, no copy
    at += numel(s);
  }
  return out;
}

}  // namespace

const OpDef& all_reduce_start_op() {
  static const OpDef& op = register_op({
      .name = "distributed::all_reduce_start",
      .num_inputs = 1,
      .shape = [](const std::vector<TensorMeta>& in, const Attrs&) { return in; },
      .cpu = start_kernel,
      .cuda = start_kernel,
      .differentiable = false,
      .collective = true,
  });
  return op;
}

const OpDef& all_reduce_wait_op() {
  static const OpDef& op = register_op({
      .name = "distributed::all_reduce_wait",
      .num_inputs = 1,
      .shape = wait_shapes,
      .cpu = wait_kernel,
      .cuda = wait_kernel,
      .differentiable = false,
      .collective = true,
  });
  return op;
}

Tensor all_reduce_start(const Tensor& t, ReduceOp op, ProcessGroup& group, StartOptions options) {
  return call_op(all_reduce_start_op(), {t},
                 {{"group", group.id()}, {"op", int64_t(op)}, {"checked", options.checked}, {"tag", options.tag}})[0];
}

TensorList all_reduce_wait(const Tensor& started, const std::vector<Shape>& shapes) {
  return call_op(all_reduce_wait_op(), {started}, {{"shapes", encode_shapes(shapes)}});
}

int64_t all_reduces_in_flight() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  return int64_t(r.pending.size());
}

int64_t all_reduces_started(int64_t tag) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.started.find(tag);
  return it == r.started.end() ? 0 : it->second;
}

}  // namespace kiln::distributed
