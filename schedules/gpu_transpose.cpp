#include "schedules/gpu_transpose.h"

#include <map>
#include <string>
#include <vector>

#include "schedules/gpu_warp_rows.h"

namespace kiln {

using namespace Halide;

namespace {

constexpr int kTile = 32;      // a tile's side: a warp's width
constexpr int kTileRows = 8;   // threads along the tile's second dim (kTile / kTileRows rows each)

// The dim of root that index e is, when e is a plain var mapped to one (`dims`: var name -> dim).
int dim_of(const Expr& e, const std::map<std::string, int>& dims) {
  const auto* v = Internal::simplify(e).as<Internal::Variable>();
  if (!v) return -1;
  auto it = dims.find(v->name);
  return it == dims.end() ? -1 : it->second;
}

// Looks for the read across through the Funcs inlined into root (a transpose view's Func called
// by a copy), following each call whose indices are plain vars.
class FindAcrossRead : public Internal::IRVisitor {
 public:
  FindAcrossRead(const std::map<std::string, Func>& inlined, const std::vector<ImageParam>& inputs,
                 const std::vector<int>& dense_dims)
      : inlined_(inlined), inputs_(inputs), dense_dims_(dense_dims) {}
  std::optional<AcrossRead> found;
  std::map<std::string, int> image_calls;  // reads of each input, through every inlined Func

  void search(const Func& f, std::map<std::string, int> dims) {
    std::swap(dims_, dims);
    callers_.push_back(f);
    for (const Expr& e : f.function().definition().values()) e.accept(this);
    callers_.pop_back();
    std::swap(dims_, dims);
  }

 private:
  using IRVisitor::visit;
  void visit(const Internal::Call* c) override {
    IRVisitor::visit(c);
    if (c->call_type == Internal::Call::Halide) {
      auto callee = inlined_.find(c->name);
      if (callee == inlined_.end()) return;
      std::map<std::string, int> dims;
      std::vector<Var> args = pure_vars(callee->second);
      for (size_t d = 0; d < c->args.size() && d < args.size(); ++d) dims[args[d].name()] = dim_of(c->args[d], dims_);
      search(callee->second, dims);
      return;
    }
    if (c->call_type != Internal::Call::Image) return;
    ++image_calls[c->name];
    for (size_t k = 0; k < inputs_.size(); ++k) {
      if (inputs_[k].name() != c->name || dense_dims_[k] < 0 || size_t(dense_dims_[k]) >= c->args.size()) continue;
      // Calls of an ImageParam go through its own Func, defined as the input itself; the reader
      // is the Func that calls that one.
      Func reader = callers_.back();
      const std::vector<Expr>& values = reader.function().definition().values();
      const auto* own = values.size() == 1 ? values[0].as<Internal::Call>() : nullptr;
      if (own && own->call_type == Internal::Call::Image && own->name == c->name && callers_.size() > 1)
        reader = callers_[callers_.size() - 2];
      AcrossRead a{inputs_[k], reader, dense_dims_[k], -1, dim_of(c->args[size_t(dense_dims_[k])], dims_)};
      for (size_t d = 0; d < c->args.size(); ++d)
        if (dim_of(c->args[d], dims_) == 0) a.inner_arg = int(d);
      if (!found && a.out_dim > 0 && a.inner_arg >= 0) found = a;
    }
  }
  const std::map<std::string, Func>& inlined_;
  const std::vector<ImageParam>& inputs_;
  const std::vector<int>& dense_dims_;
  std::map<std::string, int> dims_;
  std::vector<Func> callers_;  // the Funcs whose definitions are being searched, innermost last
};

}  // namespace

std::optional<AcrossRead> across_read(const Graph& g, const Region& r, const LoweredRegion& lowered,
                                      const ScheduleRoot& root) {
  std::vector<Var> vars = pure_vars(root.func);
  if (vars.size() < 2 || root.func.outputs() != 1 || !root.inner.empty()) return std::nullopt;
  std::vector<int> dense_dims;  // per input: its dim with stride 1 as traced, Halide's order
  for (size_t k = 0; k < lowered.inputs.size(); ++k) {
    const Value& v = g.values[size_t(r.inputs[k])];
    int dense = -1;
    for (size_t d = 0; d < v.strides.size(); ++d)
      if (v.strides[d] == 1 && v.meta.shape[d] != 1) dense = int(v.strides.size() - 1 - d);
    dense_dims.push_back(dense);
  }
  std::map<std::string, Func> inlined;
  for (const Func& f : root.inlined) inlined[f.name()] = f;
  std::map<std::string, int> dims;
  for (size_t d = 0; d < vars.size(); ++d) dims[vars[d].name()] = int(d);
  FindAcrossRead find(inlined, lowered.inputs, dense_dims);
  find.search(root.func, dims);
  // An input read twice (x + x.t()) would need a tile for each read: the one staged would span both.
  if (find.found && find.image_calls[find.found->input.name()] != 1) return std::nullopt;
  return find.found;
}

void transposed_tiles(const ScheduleRoot& root, const AcrossRead& read) {
  const TailStrategy guard = TailStrategy::GuardWithIf;
  Func f = root.func;
  std::vector<Var> v = pure_vars(f);
  Var xo("xo"), xi("xi"), yo("yo"), yi("yi"), yt("yt"), ys("ys");
  std::vector<Var> outer;  // f's other dims, one block dim
  for (size_t d = 1; d < v.size(); ++d)
    if (int(d) != read.out_dim) outer.push_back(v[d]);
  // The other dims outside the tile's blocks: left where they were (between the tile's dims, when
  // the transposed dim is not the next one), their block loop would be inside xo, where the tile
  // is computed, and Halide would not find the tile's buffer (CUDA fuzz seed 1022).
  std::vector<VarOrRVar> order{ys, xi, yt, xo, yo};
  order.insert(order.end(), outer.begin(), outer.end());
  f.tile(v[0], v[size_t(read.out_dim)], xo, yo, xi, yi, kTile, kTile, guard)
      .split(yi, yt, ys, kTile / kTileRows, guard)
      .reorder(order);
  f.gpu_threads(xi, yt);
  if (outer.empty()) f.gpu_blocks(xo, yo);
  else f.gpu_blocks(xo, yo, warp_rows::fuse_all(f, outer));
  // The input's tile, loaded along its dense dim (threadIdx.x) and stored with its other tile dim
  // innermost, one element wider than the tile: the writes (along the dense dim) and the output's
  // reads (along the other) both fall in 32 banks.
  ImageParam input = read.input;
  Func tile = input.in(read.reader);
  std::vector<Var> w = pure_vars(tile);
  Var dense = w[size_t(read.dense_arg)], across = w[size_t(read.inner_arg)];
  Var at("at"), as("as");
  tile.compute_at(f, xo)
      .split(across, at, as, kTile / kTileRows, guard)
      .reorder(as, dense, at)
      .gpu_threads(dense, at);
  std::vector<Var> storage{across};
  for (const Var& x : w)
    if (x.name() != across.name()) storage.push_back(x);
  tile.reorder_storage(storage).align_storage(across, kTile + 1);
}

}  // namespace kiln
