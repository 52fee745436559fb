// The compiled function's cache. A call is served by the first entry whose guards hold; a miss
// traces the function (one thread at a time: a given key compiles once), which may recompile past
// a failed guard, make changed sizes symbolic (automatic dynamic), or, past the recompile limit,
// run the function eagerly. An entry without graph breaks runs its one graph without calling the
// function; an entry with breaks re-traces the host code and finds each graph by structural hash.
#include <atomic>
#include <cstdlib>
#include <chrono>
#include <iomanip>
#include <iostream>
#include <map>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <sstream>

#include "autograd/grad_mode.h"
#include "dsl/error.h"
#include "dsl/nn/module.h"
#include "dsl/profiler.h"
#include "graph/backend.h"
#include "graph/compile.h"
#include "graph/compile_graph.h"
#include "graph/cuda_graphs.h"
#include "graph/guards.h"
#include "graph/logs.h"
#include "dsl/settings.h"

namespace kiln {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::atomic<int> function_counter{0};

}  // namespace

namespace detail {

struct Entry {
  GuardSet guards;
  std::vector<std::vector<bool>> dynamic;  // the dims traced as symbols
  bool has_breaks = false;
  std::shared_ptr<const Graph> graph;      // without breaks: the whole function
  std::shared_ptr<CompiledGraph> compiled;
  std::vector<int> argument_of;            // per graph input: the argument it binds, or -1
  TensorList bound;                        // per graph input: the captured tensor (or undefined)
  std::vector<std::shared_ptr<TensorImpl>> params;  // compile(Module&): parameter identities
  GraphEffects effects;                    // without breaks: writes and gradients after each run
  std::vector<GradTarget> grad_targets;    // leaves that must hold no gradient when called
};

struct CompiledCore::State {
  TracedFn fn;
  CompileOptions options;
  const nn::Module* module = nullptr;
  std::vector<std::pair<std::string, Tensor>> captured_names;  // name_captured()
  std::optional<Device> compile_for;                            // compile_for()
  GraphEffects last_effects;  // the latest entry's, for last_effects()
  Backend* backend = nullptr;

  mutable std::shared_mutex entries_mu;
  std::vector<std::shared_ptr<const Entry>> entries;
  std::mutex trace_mu;  // one trace at a time
  std::mutex graphs_mu;
  std::map<uint64_t, std::shared_ptr<CompiledGraph>> graphs;  // by structural hash
  bool cuda_graphs = false;  // graphs replayed as CUDA graphs (mode "reduce-overhead")
  std::set<std::pair<int, int>> auto_dynamic;                 // (argument, dim)

  std::atomic<int> cache_hits{0}, eager_calls{0}, compiles{0};
  mutable std::mutex stats_mu;
  CompileStats stats;  // the rest of the stats, under stats_mu
  bool warned_limit = false;
  bool record_graphs = false;  // explain(): keep every graph's text
  ExplainReport last_trace;

  std::vector<std::shared_ptr<TensorImpl>> current_params() const {
    std::vector<std::shared_ptr<TensorImpl>> out;
    if (module) module->for_each_parameter([&](const Tensor& t) { out.push_back(t.impl_ptr()); });
    return out;
  }

  // The module's parameters are the ones the entry was traced with (no allocation: every call).
  bool same_params(const Entry& e) const {
    if (!module) return true;
    size_t i = 0;
    bool same = true;
    module->for_each_parameter([&](const Tensor& t) {
      same = same && i < e.params.size() && t.impl_ptr() == e.params[i];
      ++i;
    });
    return same && i == e.params.size();
  }

  bool matches(const Entry& e, const TensorList& ts, const std::vector<AttrValue>& st, std::string* why) const {
    if (!same_params(e)) {
      if (why) {
        auto named = module->named_parameters();
        for (size_t i = 0; i < named.size() && why->empty(); ++i)
          if (i >= e.params.size() || named[i].second.impl_ptr() != e.params[i])
            *why = "module parameter '" + named[i].first + "' was replaced";
        if (why->empty()) *why = "module parameters changed";
      }
      return false;
    }
    for (const GradTarget& t : e.grad_targets) {
      const Tensor leaf = t.argument >= 0 ? ts[size_t(t.argument)] : Tensor(t.leaf);
      if (!leaf.grad().defined()) continue;
      if (why) *why = (t.argument >= 0 ? "arg " + std::to_string(t.argument) : std::string("a captured leaf")) +
                      " holds a gradient (it had none when the backward was traced into the graph)";
      return false;
    }
    return e.guards.check(ts, st, why);
  }

  std::shared_ptr<const Entry> find(const TensorList& ts, const std::vector<AttrValue>& st) const {
    std::shared_lock lock(entries_mu);
    for (const auto& e : entries)
      if (matches(*e, ts, st, nullptr)) return e;
    return nullptr;
  }

  std::shared_ptr<CompiledGraph> graph_for(const std::shared_ptr<Graph>& g) {
    uint64_t h = g->structural_hash();
    std::lock_guard<std::mutex> lock(graphs_mu);
    auto it = graphs.find(h);
    if (it != graphs.end()) return it->second;
    int n = ++compiles;
    auto t0 = std::chrono::steady_clock::now();
    std::string label = options.name + " graph " + std::to_string(n);
    RecordFunction record(label, "compile");
    PhaseSeconds phases;
    std::shared_ptr<CompiledGraph> c;
    {
      CompilePhaseSink sink(&phases);
      if (compile_for) {
        Graph moved = *g;
        move_graph_to(moved, *compile_for);
        compile_graph(moved, *backend, {options.scheduler}, label);
        c = compile_graph(*g, kiln::backend("eager"), {}, label + " where traced");
      } else {
        c = compile_graph(*g, *backend, {options.scheduler}, label);
      }
    }
    double seconds = seconds_since(t0);
    {
      std::lock_guard<std::mutex> s(stats_mu);
      stats.compile_s += seconds;
      stats.kernels = c->kernel_count();
      for (const auto& [phase, t] : phases.seconds) stats.phase_s[phase] += t;
    }
    if (log_enabled(LogChannel::perf)) {
      std::ostringstream os;
      os << label << ": compiled in " << std::fixed << std::setprecision(3) << seconds << " s:";
      for (const auto& [phase, t] : phases.seconds) os << " " << phase << " " << t << ",";
      log_line(LogChannel::perf, os.str());
    }
    if (cuda_graphs) c = with_cuda_graphs(*g, std::move(c), label);
    graphs[h] = c;
    return c;
  }

  std::vector<std::vector<bool>> dynamic_dims(const TensorList& ts) const {
    std::vector<std::vector<bool>> out;
    for (size_t i = 0; i < ts.size(); ++i) {
      const TensorImpl& t = ts[i].impl();
      std::vector<bool> dyn(t.shape.size(), false);
      for (size_t d = 0; d < t.shape.size() && options.dynamic != false; ++d) {
        uint64_t bit = d < 64 ? uint64_t(1) << d : 0;
        if ((t.marked_static & bit) || t.shape[d] < 2) continue;
        dyn[d] = (t.marked_dynamic & bit) || options.dynamic == true || auto_dynamic.count({int(i), int(d)});
      }
      // Symbolic sizes need a dense layout (the guard checks it as contiguous or a permutation).
      bool any = std::find(dyn.begin(), dyn.end(), true) != dyn.end();
      if (any && !is_dense(t)) {
        log_line(LogChannel::guards, options.name + ": arg " + std::to_string(i) + " has strides " +
                                         to_string(t.strides) + " (not dense): its sizes stay static");
        std::fill(dyn.begin(), dyn.end(), false);
      }
      out.push_back(std::move(dyn));
    }
    return out;
  }

  // Traces fn on these arguments. Runs each graph as it completes; returns the outputs and, when
  // `entry` is given, fills it for the cache.
  TensorList trace(const TensorList& ts, const std::vector<AttrValue>& st,
                   const std::vector<std::vector<bool>>& dynamic, Entry* entry) {
    auto t0 = std::chrono::steady_clock::now();
    double compile_before;
    {
      std::lock_guard<std::mutex> s(stats_mu);
      compile_before = stats.compile_s;
    }
    Tracer::Options to;
    to.function_name = options.name;
    to.fullgraph = options.fullgraph;
    to.joint = !backend->supports_autograd();
    if (module)
      for (auto& [name, t] : module->named_parameters()) to.names[&t.impl()] = name;
    for (const auto& [name, t] : captured_names) to.names[&t.impl()] = name;
    TraceModes modes = TraceModes::current();
    std::shared_ptr<CompiledGraph> last;
    std::vector<std::string> texts;
    Tracer tracer(to, [&](std::shared_ptr<Graph> g, const TensorList& inputs) {
      if (record_graphs) texts.push_back(g->text());
      last = graph_for(g);
      AutocastSuspended recorded;  // the trace holds autocast's casts as nodes
      return last->run(inputs);
    });
    TensorList symbolic = tracer.bind_arguments(ts, dynamic);
    TensorList out;
    try {
      DispatchModeGuard mode(&tracer);
      out = fn(symbolic, st);
    } catch (...) {
      tracer.abort();
      throw;
    }
    symbolic.clear();
    out = tracer.finish(out);

    ExplainReport report;
    report.function = options.name;
    report.graph_count = tracer.graph_count();
    report.op_count = tracer.op_count();
    report.breaks = tracer.breaks();
    if (entry) {
      Entry& e = *entry;
      std::vector<SymShape> shapes;
      for (size_t i = 0; i < ts.size(); ++i) shapes.push_back(tracer.argument_shape(int(i)));
      e.dynamic = dynamic;
      for (size_t i = 0; i < ts.size(); ++i)  // specialized symbols are static from now on
        for (size_t d = 0; d < shapes[i].size(); ++d)
          if (shapes[i][d].is_static()) e.dynamic[i][d] = false;
      e.has_breaks = !tracer.breaks().empty();
      e.grad_targets = tracer.grad_targets();
      TensorList captured;
      std::vector<std::string> captured_names;
      if (!e.has_breaks) {
        const std::shared_ptr<Graph>& g = tracer.last_graph();
        if (!last) last = graph_for(g);  // a function without ops still gets its (empty) graph
        e.graph = g;
        e.compiled = last;
        e.effects = tracer.last_effects();
        last_effects = e.effects;
        for (size_t i = 0; i < size_t(g->forward_input_count()); ++i) {
          bool arg = g->inputs[i].kind == InputKind::argument;
          e.argument_of.push_back(arg ? g->inputs[i].index : -1);
          e.bound.push_back(arg ? Tensor() : tracer.last_bindings()[i]);
          if (!arg) {
            captured.push_back(tracer.last_bindings()[i]);
            captured_names.push_back("captured \"" + g->inputs[i].name + "\"");
          }
        }
      }
      e.guards = GuardSet(ts, shapes, st, modes, captured, captured_names);
      report.guards = e.guards.describe();
      if (log_enabled(LogChannel::guards))
        for (const std::string& g : report.guards) log_line(LogChannel::guards, options.name + ": " + g);
    }
    report.graphs = std::move(texts);
    {
      std::lock_guard<std::mutex> s(stats_mu);
      stats.trace_s += seconds_since(t0) - (stats.compile_s - compile_before);
      last_trace = report;
    }
    return out;
  }

  TensorList run(const Entry& e, const TensorList& ts, const std::vector<AttrValue>& st) {
    if (e.has_breaks) return trace(ts, st, e.dynamic, nullptr);
    TensorList inputs(e.argument_of.size());
    for (size_t i = 0; i < inputs.size(); ++i) inputs[i] = e.argument_of[i] >= 0 ? ts[size_t(e.argument_of[i])] : e.bound[i];
    TensorList out;
    {
      AutocastSuspended recorded;  // the graph holds autocast's casts as nodes
      out = e.compiled->run(inputs);
    }
    if (e.effects.empty()) return out;
    for (const auto& [dst, k] : e.effects.writes) Tensor(dst).copy_(out[size_t(k)]);
    for (const auto& [t, k] : e.effects.grads) (t.argument >= 0 ? ts[size_t(t.argument)] : Tensor(t.leaf)).set_grad(out[size_t(k)]);
    out.resize(e.effects.function_outputs);
    return out;
  }
};

CompiledCore::CompiledCore(TracedFn fn, CompileOptions options, const nn::Module* module)
    : s_(std::make_unique<State>()) {
  if (options.name.empty()) options.name = "compiled function " + std::to_string(++function_counter);
  KILN_CHECK(options.recompile_limit >= 1, "compile: recompile_limit must be >= 1, got ", options.recompile_limit);
  if (options.backend.empty()) {
    options.backend = setting("KILN_BACKEND").value_or("eager");
  }
  s_->backend = &backend(options.backend);
  s_->backend->check({options.scheduler});
  s_->cuda_graphs = cuda_graphs_wanted(options.mode);
  s_->fn = std::move(fn);
  s_->options = std::move(options);
  s_->module = module;
}

CompiledCore::~CompiledCore() = default;

const CompileOptions& CompiledCore::options() const { return s_->options; }

void CompiledCore::name_captured(std::vector<std::pair<std::string, Tensor>> named) {
  s_->captured_names = std::move(named);
}

void CompiledCore::compile_for(Device d) { s_->compile_for = d; }

GraphEffects CompiledCore::last_effects() const {
  std::lock_guard<std::mutex> lock(s_->trace_mu);
  return s_->last_effects;
}

TensorList CompiledCore::call(const TensorList& ts, const std::vector<AttrValue>& st) {
  State& s = *s_;
  if (Tracer::current()) return s.fn(ts, st);  // called while tracing another function: inline it
  RecordFunction record(s.options.name, "compiled_call");
  if (auto e = s.find(ts, st)) {
    ++s.cache_hits;
    return s.run(*e, ts, st);
  }
  std::unique_lock<std::mutex> tracing(s.trace_mu);
  if (auto e = s.find(ts, st)) {  // another thread traced it meanwhile
    tracing.unlock();
    ++s.cache_hits;
    return s.run(*e, ts, st);
  }
  std::string reason;
  {
    std::shared_lock lock(s.entries_mu);
    if (!s.entries.empty()) {
      s.matches(*s.entries.back(), ts, st, &reason);
      if (s.options.dynamic != false)
        for (auto dim : s.entries.back()->guards.size_changes(ts)) s.auto_dynamic.insert(dim);
    }
    if (int(s.entries.size()) >= s.options.recompile_limit) {
      ++s.eager_calls;
      std::unique_lock<std::mutex> st_lock(s.stats_mu);
      if (!s.warned_limit) {
        s.warned_limit = true;
        std::cerr << "kiln: warning: " << s.options.name << " reached its recompile limit ("
                  << s.options.recompile_limit << "); it runs eagerly from now on. Last reason: " << reason << '\n';
      }
      st_lock.unlock();
      lock.unlock();
      tracing.unlock();
      return s.fn(ts, st);
    }
  }
  if (!reason.empty()) {
    std::lock_guard<std::mutex> st_lock(s.stats_mu);
    s.stats.recompiles++;
    s.stats.recompile_reasons.push_back(reason);
    log_line(LogChannel::recompiles, s.options.name + ": recompiling: " + reason);
  }
  auto entry = std::make_shared<Entry>(
      Entry{GuardSet({}, {}, {}, TraceModes{}, {}), {}, false, nullptr, nullptr, {}, {}, s.current_params(), {}, {}});
  TensorList out;
  {
    RecordFunction tracing_event("trace " + s.options.name, "compile");
    out = s.trace(ts, st, s.dynamic_dims(ts), entry.get());
  }
  std::unique_lock lock(s.entries_mu);
  s.entries.push_back(std::move(entry));
  return out;
}

ExplainReport CompiledCore::explain(const TensorList& ts, const std::vector<AttrValue>& st) const {
  CompiledCore fresh(s_->fn, s_->options, s_->module);
  fresh.s_->record_graphs = true;
  fresh.call(ts, st);
  std::lock_guard<std::mutex> lock(fresh.s_->stats_mu);
  return fresh.s_->last_trace;
}

CompileStats CompiledCore::stats() const {
  std::lock_guard<std::mutex> lock(s_->stats_mu);
  CompileStats out = s_->stats;
  out.compiles = s_->compiles;
  out.cache_hits = s_->cache_hits;
  out.eager_calls = s_->eager_calls;
  return out;
}

void CompiledCore::reset() {
  State& s = *s_;
  std::lock_guard<std::mutex> tracing(s.trace_mu);
  std::unique_lock lock(s.entries_mu);
  std::lock_guard<std::mutex> g(s.graphs_mu);
  std::lock_guard<std::mutex> st(s.stats_mu);
  s.entries.clear();
  s.graphs.clear();
  s.auto_dynamic.clear();
  s.stats = {};
  s.cache_hits = s.eager_calls = s.compiles = 0;
  s.warned_limit = false;
}

}  // namespace detail

void mark_dynamic(const Tensor& t, int64_t dim) {
  int d = wrap_dim("mark_dynamic", dim, t.dim());
  KILN_CHECK(d < 64, "mark_dynamic: dims past 63 cannot be marked");
  t.impl().marked_dynamic |= uint64_t(1) << d;
  t.impl().marked_static &= ~(uint64_t(1) << d);
}

void mark_static(const Tensor& t, int64_t dim) {
  int d = wrap_dim("mark_static", dim, t.dim());
  KILN_CHECK(d < 64, "mark_static: dims past 63 cannot be marked");
  t.impl().marked_static |= uint64_t(1) << d;
  t.impl().marked_dynamic &= ~(uint64_t(1) << d);
}

CompiledFunction<Tensor(const Tensor&)> compile(nn::Module& module, CompileOptions options) {
  nn::Module* m = &module;
  return CompiledFunction<Tensor(const Tensor&)>([m](const Tensor& x) { return m->forward(x); }, std::move(options),
                                                 m);
}

std::string ExplainReport::text() const {
  std::ostringstream os;
  os << "explain: " << function << "\n  graphs: " << graph_count << ", ops: " << op_count
     << ", graph breaks: " << breaks.size() << '\n';
  for (size_t i = 0; i < breaks.size(); ++i) os << "  break " << i + 1 << ": " << breaks[i].str() << '\n';
  os << "  guards:\n";
  for (const std::string& g : guards) os << "    " << g << '\n';
  for (size_t i = 0; i < graphs.size(); ++i) {
    os << "  graph " << i + 1 << ":\n";
    std::istringstream lines(graphs[i]);
    for (std::string line; std::getline(lines, line);) os << "    " << line << '\n';
  }
  return os.str();
}

}  // namespace kiln
