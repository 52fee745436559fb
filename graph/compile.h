// kiln::compile: capture a function into graphs and run them instead of the function.
//
//   auto f = compile([&](Tensor x) { return model.forward(x); });
//   Tensor y = f(x);          // first call: traces model.forward, compiles the graph, runs it
//   y = f(x2);                // same guards: runs the cached graph; the lambda does not run
//   f.stats().recompiles;     // a new dtype, rank or size recompiles (sizes become symbolic)
//   ExplainReport r = explain(f, x);   // graphs, breaks (reason, file:line), guards
//
// Arguments may be Tensor, std::vector<Tensor>, and static values (int, int64_t, double, bool,
// std::string) guarded by value; results may be Tensor, std::vector<Tensor>, std::pair or
// std::tuple of Tensors. Tensors the function reads from its enclosing scope (parameters) are graph
// inputs read by reference: in-place updates are seen, and the graph holds them alive. Rebinding a
// captured Tensor variable is not seen by a compiled lambda; compile(Module&) guards the identity
// of the module's parameters, so replacing one recompiles. Random ops draw fresh numbers on every
// call.
//
// A host read of a tensor's values inside the function (item(), to_vector(), is_nonzero(),
// printing, copy_, backward) is a graph break: the graph so far runs, the read happens, tracing
// continues in a new graph. Such a function runs its host code on every call and finds its graphs
// by structure. CompileOptions::fullgraph turns a break into a kiln::Error with its reason and line.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "dsl/attrs.h"
#include "dsl/nn/module.h"
#include "dsl/tensor.h"
#include "graph/tracer.h"

namespace kiln {


struct CompileOptions {
  // "eager" (the reference: ops one by one) or "halide" (fused pipelines, JIT); empty: the
  // KILN_BACKEND environment variable, else "eager".
  std::string backend = {};
  // The halide backend's scheduler: "kiln" (its own), or Halide's "mullapudi2016", "adams2019",
  // "li2018" for comparison.
  std::string scheduler = "kiln";
  bool fullgraph = false;    // a graph break raises kiln::Error instead
  int recompile_limit = 8;   // graphs per function; past it the function runs eagerly (one warning)
  // Dynamic shapes: unset = automatic (first compile static, sizes that change become symbolic);
  // true = every size >= 2 symbolic from the start; false = always static.
  std::optional<bool> dynamic = std::nullopt;
  std::string name = {};  // for logs and reports; default "compiled function N"
  // "default", or "reduce-overhead": calls on CUDA are captured and replayed as CUDA graphs
  // (graph/cuda_graphs.h; outputs still referenced at the next replay are copied out first). KILN_CUDA_GRAPHS=1
  // turns that on for every compile.
  std::string mode = "default";
};

struct CompileStats {
  int compiles = 0;       // graphs compiled (a function with breaks compiles several)
  int recompiles = 0;     // traces after the first, each for a failed guard
  int cache_hits = 0;     // calls served by a cached trace
  int eager_calls = 0;    // calls run eagerly past the recompile limit
  int kernels = 0;        // kernel launches per run of the most recently compiled graph
  std::vector<std::string> recompile_reasons;  // "arg 0 dim 0: 32 -> 64"
  double trace_s = 0;     // time in tracing (the function's host code and shape rules)
  double compile_s = 0;   // time in the backend's compile
  // compile_s by phase: each graph pass, the partition, and the backend's (the halide backend:
  // fusion plan, lowering, scheduling, code generation, link, load or disk cache load, Halide
  // runtime load). Regions generate code side by side on KILN_COMPILE_THREADS threads, whose
  // seconds add up here, so with several threads the phases may sum to more than compile_s.
  std::map<std::string, double> phase_s;
};

struct ExplainReport {
  std::string function;
  int graph_count = 0;
  int op_count = 0;
  std::vector<GraphBreak> breaks;   // reason, file, line
  std::vector<std::string> guards;
  std::vector<std::string> graphs;  // each graph as text
  std::string text() const;
};

// Ask for dim `dim` of `t` to be symbolic (dynamic) or static the next time a compiled function
// traces with it as an argument, overriding automatic dynamic.
void mark_dynamic(const Tensor& t, int64_t dim);
void mark_static(const Tensor& t, int64_t dim);

namespace detail {

using TracedFn = std::function<TensorList(const TensorList& tensors, const std::vector<AttrValue>& statics)>;

// The type-erased compiled function: cache of traces keyed by guards, recompiles, breaks, stats.
class CompiledCore {
 public:
  // With `module`: its parameters are named in graphs, and their identity is guarded.
  CompiledCore(TracedFn fn, CompileOptions options, const nn::Module* module = nullptr);
  ~CompiledCore();
  TensorList call(const TensorList& tensors, const std::vector<AttrValue>& statics);
  // Traces the function once on these arguments with an empty cache of its own; this one's cache
  // and stats are untouched.
  ExplainReport explain(const TensorList& tensors, const std::vector<AttrValue>& statics) const;
  CompileStats stats() const;
  void reset();
  const CompileOptions& options() const;
  // Names for captured tensors besides the module's parameters (an ahead-of-time training step's
  // optimizer state, aot/export.h): graphs name those inputs so. Before the first call.
  void name_captured(std::vector<std::pair<std::string, Tensor>> named);
  // Compiles each traced graph for device `d` instead of its arguments' device, and runs it op by
  // op where it was traced (an ahead-of-time CUDA model traced on a machine without a GPU: the
  // compile is recorded by the open export, aot/export.h). Before the first call.
  void compile_for(Device d);
  // The writes and gradients the most recently traced graph applies after each run (empty when
  // it has none, or the function had breaks).
  GraphEffects last_effects() const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

// How each argument and result type crosses into the core: tensors in one list, static values in
// another (a tensor list's length is a static value).
template <class T> struct Arg;
template <> struct Arg<Tensor> {
  static void put(const Tensor& t, TensorList& ts, std::vector<AttrValue>&) { ts.push_back(t); }
  static Tensor get(const TensorList& ts, size_t& ti, const std::vector<AttrValue>&, size_t&) { return ts[ti++]; }
};
template <> struct Arg<std::vector<Tensor>> {
  static void put(const std::vector<Tensor>& v, TensorList& ts, std::vector<AttrValue>& st) {
    st.emplace_back(int64_t(v.size()));
    ts.insert(ts.end(), v.begin(), v.end());
  }
  static std::vector<Tensor> get(const TensorList& ts, size_t& ti, const std::vector<AttrValue>& st, size_t& si) {
    auto n = size_t(std::get<int64_t>(st[si++]));
    std::vector<Tensor> v(ts.begin() + ptrdiff_t(ti), ts.begin() + ptrdiff_t(ti + n));
    ti += n;
    return v;
  }
};
template <class T, class Stored>
struct StaticArg {
  static void put(const T& v, TensorList&, std::vector<AttrValue>& st) { st.emplace_back(Stored(v)); }
  static T get(const TensorList&, size_t&, const std::vector<AttrValue>& st, size_t& si) {
    return T(std::get<Stored>(st[si++]));
  }
};
template <> struct Arg<int> : StaticArg<int, int64_t> {};
template <> struct Arg<int64_t> : StaticArg<int64_t, int64_t> {};
template <> struct Arg<double> : StaticArg<double, double> {};
template <> struct Arg<float> : StaticArg<float, double> {};
template <> struct Arg<bool> : StaticArg<bool, bool> {};
template <> struct Arg<std::string> : StaticArg<std::string, std::string> {};

template <class R> struct Result;
template <> struct Result<Tensor> {
  static TensorList flatten(const Tensor& t) { return {t}; }
  static Tensor unflatten(TensorList ts) { return ts.at(0); }
};
template <> struct Result<std::vector<Tensor>> {
  static TensorList flatten(std::vector<Tensor> v) { return v; }
  static std::vector<Tensor> unflatten(TensorList ts) { return ts; }
};
template <class... Ts> struct Result<std::tuple<Ts...>> {
  static_assert((std::is_same_v<Ts, Tensor> && ...), "compile: a tuple result must hold only Tensors");
  static TensorList flatten(const std::tuple<Ts...>& t) {
    return std::apply([](const auto&... x) { return TensorList{x...}; }, t);
  }
  static std::tuple<Ts...> unflatten(TensorList ts) {
    return [&]<size_t... I>(std::index_sequence<I...>) { return std::tuple<Ts...>{ts.at(I)...}; }(
        std::index_sequence_for<Ts...>{});
  }
};
template <> struct Result<std::pair<Tensor, Tensor>> {
  static TensorList flatten(const std::pair<Tensor, Tensor>& p) { return {p.first, p.second}; }
  static std::pair<Tensor, Tensor> unflatten(TensorList ts) { return {ts.at(0), ts.at(1)}; }
};

template <class F> struct Signature : Signature<decltype(&F::operator())> {};
template <class C, class R, class... A> struct Signature<R (C::*)(A...) const> { using type = R(A...); };
template <class C, class R, class... A> struct Signature<R (C::*)(A...)> { using type = R(A...); };
template <class R, class... A> struct Signature<R (*)(A...)> { using type = R(A...); };
template <class R, class... A> struct Signature<R(A...)> { using type = R(A...); };

}  // namespace detail

template <class Sig> class CompiledFunction;

template <class R, class... A>
class CompiledFunction<R(A...)> {
 public:
  // `module`, when given, is the module whose parameters f reads: they are named in graphs and
  // replacing one recompiles.
  template <class F>
  CompiledFunction(F f, CompileOptions options, const nn::Module* module = nullptr)
      : core_(std::make_shared<detail::CompiledCore>(wrap(std::move(f)), std::move(options), module)) {}

  R operator()(A... args) const {
    TensorList ts;
    std::vector<AttrValue> st;
    flatten_args(ts, st, args...);
    return detail::Result<R>::unflatten(core_->call(ts, st));
  }
  ExplainReport explain(A... args) const {
    TensorList ts;
    std::vector<AttrValue> st;
    flatten_args(ts, st, args...);
    return core_->explain(ts, st);
  }
  CompileStats stats() const { return core_->stats(); }
  void reset() { core_->reset(); }  // drops every cached graph and the stats
  const CompileOptions& options() const { return core_->options(); }

 private:
  template <class F>
  static detail::TracedFn wrap(F f) {
    return [f = std::move(f)](const TensorList& ts, const std::vector<AttrValue>& st) mutable -> TensorList {
      size_t ti = 0, si = 0;
      auto args = std::tuple<std::decay_t<A>...>{detail::Arg<std::decay_t<A>>::get(ts, ti, st, si)...};
      return detail::Result<std::decay_t<R>>::flatten(std::apply(f, args));
    };
  }
  static void flatten_args(TensorList& ts, std::vector<AttrValue>& st, const std::decay_t<A>&... args) {
    (detail::Arg<std::decay_t<A>>::put(args, ts, st), ...);
  }
  std::shared_ptr<detail::CompiledCore> core_;
};

template <class F>
  requires(!std::is_base_of_v<nn::Module, std::decay_t<F>>)
auto compile(F f, CompileOptions options = {}) {
  using Sig = typename detail::Signature<std::decay_t<F>>::type;
  return CompiledFunction<Sig>(std::move(f), std::move(options));
}

// A module's forward, compiled; guards on the identity of its parameters.
CompiledFunction<Tensor(const Tensor&)> compile(nn::Module& module, CompileOptions options = {});

template <class Sig, class... Args>
ExplainReport explain(const CompiledFunction<Sig>& f, Args&&... args) {
  return f.explain(std::forward<Args>(args)...);
}

}  // namespace kiln
