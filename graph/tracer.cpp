#include "graph/tracer.h"

#include <algorithm>
#include <mutex>

#include "autograd/derivatives.h"
#include "autograd/grad_mode.h"
#include "dsl/error.h"
#include "dsl/trace_hooks.h"
#include "graph/guards.h"
#include "graph/logs.h"

namespace kiln {

namespace {

thread_local Tracer* active = nullptr;

TracedValue& live_traced(const Tensor& t, std::string_view what) {
  TracedValue& tv = *t.impl().traced;
  if (tv.dead || tv.tracer != active)
    throw_error(what, ": a tensor of shape ", to_string(t.impl().shape),
                " was made while tracing a compiled function and used after that trace ended (or from "
                "another thread); values inside a compiled function exist only there: return the tensor instead");
  return tv;
}

void install_hooks() {
  static std::once_flag once;
  std::call_once(once, [] {
    TraceHooks h;
    h.materialize = [](const Tensor& t, std::string_view reason, const std::source_location& where) {
      live_traced(t, reason).tracer->materialize(t, reason, where);
    };
    h.read_sizes = [](const Tensor& t, int64_t dim, const std::source_location& where) {
      live_traced(t, "size()").tracer->read_sizes(t, dim, where);
    };
    h.alias = [](const Tensor& t) { return live_traced(t, "detach()").tracer->alias(t); };
    h.write = [](const Tensor& dst, const Tensor& src, const std::source_location& where) {
      return active && active->write(dst, src, where);
    };
    h.backward = [](const Tensor& root, const Tensor& gradient, const std::source_location& where) {
      return live_traced(root, "backward()").tracer->backward(root, gradient, where);
    };
    set_trace_hooks(h);
  });
}

std::shared_ptr<Storage> no_data(Device d) { return std::make_shared<Storage>(nullptr, 0, d, nullptr); }

}  // namespace

std::string GraphBreak::str() const {
  return (file.empty() ? std::string("<unknown line>") : file + ":" + std::to_string(line)) + ": " + reason;
}

Tracer* Tracer::current() { return active; }

Tracer::Tracer(Options options, RunGraph run) : options_(std::move(options)), run_(std::move(run)) {
  install_hooks();
  env_->on_guard = [](const std::string& g) { log_line(LogChannel::guards, "guard added: " + g); };
  new_segment();
  previous_ = active;
  active = this;
}

Tracer::~Tracer() {
  if (!finished_) abort();
  active = previous_;
}

void Tracer::new_segment() {
  seg_ = Segment{};
  seg_.graph = std::make_shared<Graph>();
  seg_.graph->shape_env = env_;
}

Tensor Tracer::make_symbolic(int value, const std::shared_ptr<Storage>& storage, bool detached) {
  const Value& v = seg_.graph->values[value];
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = storage;
  impl->shape = v.meta.shape;
  impl->strides = v.strides;
  impl->offset = v.offset;
  impl->dtype = v.meta.dtype;
  impl->traced = std::make_shared<TracedValue>(TracedValue{this, value, detached, false});
  seg_.symbolic.push_back(impl);
  return Tensor(std::move(impl));
}

TensorList Tracer::bind_arguments(const TensorList& args, const std::vector<std::vector<bool>>& dynamic) {
  TensorList out;
  for (size_t i = 0; i < args.size(); ++i) {
    const Tensor& a = args[i];
    const TensorImpl& ai = a.impl();
    SymShape sym;
    for (size_t d = 0; d < ai.shape.size(); ++d) {
      bool dyn = i < dynamic.size() && d < dynamic[i].size() && dynamic[i][d];
      sym.push_back(dyn ? SymDim::symbol(env_->new_symbol(ai.shape[d], "arg " + std::to_string(i) + " dim " +
                                                                          std::to_string(d)))
                        : SymDim::constant(ai.shape[d]));
    }
    arg_shapes_.push_back(sym);
    int v = seg_.graph->add_input(InputKind::argument, int(i), "arg" + std::to_string(i),
                                  {ai.shape, ai.dtype, a.device()}, sym, ai.strides, ai.offset, a.requires_grad());
    seg_.bound.push_back(a);
    note_input_probe(v);
    Tensor s = make_symbolic(v, no_data(a.device()), false);
    s.impl().autograd = ai.autograd;  // requires_grad() reads the same inside the function
    out.push_back(s);
  }
  return out;
}

// An input's layout at the probe sizes: dense in the same stride order as traced (guards keep
// inputs with symbolic sizes dense), or as traced when its sizes are static.
ViewMeta Tracer::probe_layout_of_input(const Value& v) const {
  ViewMeta p{{}, {}, v.offset};
  bool dynamic = false;
  for (size_t d = 0; d < v.sym.size(); ++d) {
    p.shape.push_back(env_->probe(v.sym[d], v.meta.shape[d]));
    dynamic = dynamic || p.shape.back() != v.meta.shape[d];
  }
  if (!dynamic) return {v.meta.shape, v.strides, v.offset};
  std::vector<int> order = stride_order(v.strides);
  p.strides.assign(v.strides.size(), 0);
  int64_t step = 1;
  for (size_t k = order.size(); k-- > 0;) {
    p.strides[size_t(order[k])] = step;
    step *= p.shape[size_t(order[k])];
  }
  return p;
}

void Tracer::note_input_probe(int v) {
  if (seg_.probe_layout.size() <= size_t(v)) seg_.probe_layout.resize(size_t(v) + 1);
  seg_.probe_layout[size_t(v)] = probe_layout_of_input(seg_.graph->values[size_t(v)]);
}

SymShape Tracer::argument_shape(int i) const { return env_->canonical(arg_shapes_.at(i)); }

Tensor Tracer::symbolic(int value) {
  return make_symbolic(value, no_data(seg_.graph->values[size_t(value)].meta.device), false);
}

// A named tensor's name, also for a detached view of all of it (the optimizer reads its
// parameters through p.detach()); else "captured<slot>".
std::string Tracer::captured_name(const TensorImpl& impl, int slot) const {
  auto n = options_.names.find(&impl);
  if (n != options_.names.end()) return n->second;
  for (const auto& [named, name] : options_.names)
    if (named->storage == impl.storage && named->shape == impl.shape && named->strides == impl.strides &&
        named->offset == impl.offset)
      return name;
  return "captured" + std::to_string(slot);
}

int Tracer::value_of(const Tensor& t) {
  const TensorImpl* impl = &t.impl();
  if (impl->traced) return live_traced(t, "an op").value;
  for (const auto& [dst, value] : seg_.writes)
    if (dst.storage() == impl->storage) {
      KILN_CHECK(impl->shape == dst.impl().shape && impl->strides == dst.impl().strides && impl->offset == 0,
                 "compile: ", options_.function_name, " reads a view (shape ", to_string(impl->shape),
                 ") of a tensor it wrote in place earlier in the same graph; read the tensor itself");
      return value;
    }
  auto it = seg_.input_of.find(impl);
  if (it != seg_.input_of.end()) return it->second;
  auto real = real_shapes_.find(impl);
  bool carried = real != real_shapes_.end();
  int slot = int(seg_.graph->inputs.size());
  std::string nm;
  if (carried) {
    nm = "carried" + std::to_string(slot);
  } else {
    nm = captured_name(*impl, slot);
  }
  int v = seg_.graph->add_input(carried ? InputKind::carried : InputKind::captured, slot, nm,
                                {impl->shape, impl->dtype, t.device()},
                                carried ? real->second : static_shape(impl->shape), impl->strides, impl->offset,
                                t.requires_grad());
  seg_.bound.push_back(t);
  seg_.input_of[impl] = v;
  note_input_probe(v);
  return v;
}

TensorList Tracer::call(const OpDef& def, const TensorList& inputs, const Attrs& attrs) {
  Graph& g = *seg_.graph;
  std::vector<int> ins;
  std::vector<TensorMeta> metas;
  std::vector<SymShape> syms;
  for (const Tensor& t : inputs) {
    ins.push_back(value_of(t));
    metas.push_back(g.values[ins.back()].meta);
    syms.push_back(g.values[ins.back()].sym);
  }
  std::vector<SymShape> out_syms;
  std::vector<TensorMeta> out_metas = env_->infer(def, metas, syms, attrs, out_syms);
  // Views (and a cast to the same dtype, which returns its input) keep the input's layout and
  // storage; every other op makes a new contiguous tensor, as its eager kernel does.
  bool same_layout = def.schedule_class == ScheduleClass::view ||
                     (def.name == "cast" && out_metas[0].dtype == metas[0].dtype);
  std::vector<Value> outs;
  for (size_t k = 0; k < out_metas.size(); ++k) {
    Value o{out_metas[k], out_syms[k], contiguous_strides(out_metas[k].shape), 0, -1, 0};
    if (same_layout) {
      const Value& in = g.values[ins[0]];
      ViewMeta vm = def.view ? def.view.layout({in.meta.shape, in.strides, in.offset}, attrs)
                             : ViewMeta{in.meta.shape, in.strides, in.offset};
      o.strides = vm.strides;
      o.offset = vm.offset;
    }
    outs.push_back(std::move(o));
  }
  // A view checked at the probe sizes as well: where its layout rule only holds at the traced
  // sizes (merging dims whose strides line up only there), those sizes are guarded.
  std::vector<ViewMeta> probes;
  bool dynamic = false;
  for (const SymShape& s : syms)
    for (const SymDim& d : s) dynamic = dynamic || !env_->canonical(d).is_static();
  for (size_t k = 0; k < outs.size(); ++k) {
    ViewMeta p{{}, {}, 0};
    for (size_t d = 0; d < outs[k].sym.size(); ++d) p.shape.push_back(env_->probe(outs[k].sym[d], outs[k].meta.shape[d]));
    p.strides = contiguous_strides(p.shape);
    if (same_layout && dynamic) {
      const ViewMeta& pin = seg_.probe_layout[size_t(ins[0])];
      try {
        p = def.view ? def.view.layout(pin, attrs) : pin;
      } catch (const Error&) {
        for (const SymDim& d : syms[0]) env_->specialize(d, def.name + "'s layout rule holds only at the traced sizes");
        p = {outs[k].meta.shape, outs[k].strides, outs[k].offset};
      }
    } else if (same_layout) {
      p = {outs[k].meta.shape, outs[k].strides, outs[k].offset};
    }
    probes.push_back(std::move(p));
  }
  std::vector<int> ids = g.add_node(def, attrs, ins, std::move(outs));
  for (size_t k = 0; k < ids.size(); ++k) {
    if (seg_.probe_layout.size() <= size_t(ids[k])) seg_.probe_layout.resize(size_t(ids[k]) + 1);
    seg_.probe_layout[size_t(ids[k])] = std::move(probes[k]);
  }
  g.nodes.back().grad_enabled = grad_enabled();
  ++ops_traced_;
  // Inside the function, requires_grad() of a result reads as it would eagerly.
  bool grad = grad_enabled() && is_differentiable(def) &&
              std::any_of(inputs.begin(), inputs.end(), [](const Tensor& t) { return t.requires_grad(); });
  TensorList result;
  for (int id : ids) {
    result.push_back(make_symbolic(id, same_layout ? inputs[0].storage() : no_data(g.values[id].meta.device), false));
    if (grad && is_floating(g.values[id].meta.dtype)) result.back().requires_grad_();
  }
  return result;
}

void Tracer::run_segment(std::vector<int> outputs, bool final) {
  std::shared_ptr<Graph> g = seg_.graph;
  std::vector<std::shared_ptr<TensorImpl>> live;
  for (const auto& w : seg_.symbolic)
    if (auto p = w.lock(); p && p->traced && !p->traced->dead) live.push_back(p);
  if (!final)  // every live value computed here (inputs become real by binding)
    for (const auto& p : live)
      if (g->values[p->traced->value].producer >= 0 &&
          std::find(outputs.begin(), outputs.end(), p->traced->value) == outputs.end())
        outputs.push_back(p->traced->value);
  GraphEffects effects;
  effects.function_outputs = outputs.size();
  if (final)
    for (const GradTarget& t : grad_targets_) {
      Tensor grad = Tensor(t.leaf).grad();
      if (!grad.defined() || !grad.is_traced() || grad.impl().traced->dead) continue;
      effects.grads.push_back({t, int(outputs.size())});
      outputs.push_back(grad.impl().traced->value);
    }
  g->writes.clear();
  for (const auto& [dst, value] : seg_.writes) {
    for (size_t i = 0; i < seg_.bound.size(); ++i)
      if (seg_.bound[i].storage() == dst.storage() && seg_.bound[i].impl().offset == 0)
        g->writes.push_back({int(outputs.size()), int(i)});
    effects.writes.push_back({dst, int(outputs.size())});
    outputs.push_back(value);
  }
  g->outputs = outputs;
  if (options_.joint && !g->nodes.empty() && g->needs_autograd()) append_backward(outputs);

  TensorList results;
  if (!g->nodes.empty()) {
    DispatchModesSuspended no_modes;  // run the graph, do not trace it again
    results = run_(g, seg_.bound);
    ++graphs_run_;
    last_graph_ = g;
    last_bound_ = seg_.bound;
  } else {
    for (int v : outputs) {
      const auto& in = g->inputs;
      auto it = std::find_if(in.begin(), in.end(), [&](const GraphInput& x) { return x.value == v; });
      results.push_back(seg_.bound[size_t(it - in.begin())]);
    }
    if (final) {
      last_graph_ = g;
      last_bound_ = seg_.bound;
    }
  }
  if (final) last_effects_ = effects;
  KILN_CHECK(results.size() == (g->joint ? size_t(g->joint->forward_outputs) : outputs.size()),
             "compile: the backend returned ", results.size(),
             " outputs for a graph with ", outputs.size());
  {
    DispatchModesSuspended no_modes;
    writing_back_ = true;
    try {
      for (const auto& [dst, k] : effects.writes) Tensor(dst).copy_(results[size_t(k)]);
    } catch (...) {
      writing_back_ = false;
      throw;
    }
    writing_back_ = false;
  }

  std::unordered_map<int, Tensor> result_of;
  for (size_t i = 0; i < seg_.bound.size(); ++i) result_of[g->inputs[i].value] = seg_.bound[i];
  for (size_t k = 0; k < outputs.size(); ++k) result_of[outputs[k]] = results[k];
  for (const auto& p : live) {
    TracedValue& tv = *p->traced;
    auto it = result_of.find(tv.value);
    if (it == result_of.end()) {  // only at the end: an intermediate the function kept elsewhere
      tv.dead = true;
      continue;
    }
    const TensorImpl& r = it->second.impl();
    SymShape sym = g->values[tv.value].sym;
    p->storage = r.storage;
    p->offset = r.offset;
    p->shape = r.shape;
    p->strides = r.strides;
    p->autograd = tv.detached ? nullptr : r.autograd;
    p->traced.reset();
    made_real_.push_back(p);
    real_shapes_[p.get()] = sym;
  }
}

bool Tracer::write(const Tensor& dst, const Tensor& src, const std::source_location& where) {
  if (writing_back_) return false;
  const TensorImpl& d = dst.impl();
  bool whole = !d.traced && d.offset == 0 && dst.is_contiguous() &&
               d.storage->nbytes == size_t(numel(d.shape)) * itemsize(d.dtype) && src.device() == dst.device();
  for (size_t i = 0; whole && i < seg_.bound.size(); ++i)  // an argument's data changes from call to call
    whole = !(seg_.graph->inputs[i].kind == InputKind::argument && seg_.bound[i].storage() == d.storage);
  if (whole) whole = broadcast_shapes("copy_", src.shape(), d.shape) == d.shape;
  if (!whole) {  // the write must happen now, between the graphs before and after it
    materialize(Tensor(), "copy_(): an in-place write into a view or an argument", where);
    return false;
  }
  int v;
  {
    NoGradGuard no_grad;
    DispatchModeGuard tracing(this);
    Tensor s = src.dtype() == d.dtype ? src : src.to(d.dtype);
    if (s.shape() != d.shape) s = s.expand(d.shape);
    v = value_of(s);
  }
  for (auto& [old, value] : seg_.writes)
    if (old.storage() == d.storage) {
      value = v;
      return true;
    }
  seg_.writes.push_back({dst, v});
  return true;
}

void Tracer::materialize(const Tensor& t, std::string_view reason, const std::source_location& where) {
  std::string at = where_str(where);
  GraphBreak b{std::string(reason), where.line() ? at.substr(0, at.rfind(':')) : "", int(where.line())};
  if (options_.fullgraph)
    throw_error("compile(fullgraph=true): ", options_.function_name, " has a graph break at ", b.str());
  breaks_.push_back(b);
  log_line(LogChannel::graph_breaks, where,
           std::string(reason) + " (graph " + std::to_string(graphs_run_ + 1) + " of " + options_.function_name +
               " ends after " + std::to_string(seg_.graph->nodes.size()) + " ops)");
  run_segment({}, false);
  new_segment();
}

void Tracer::read_sizes(const Tensor& t, int64_t dim, const std::source_location& where) {
  const Value& v = seg_.graph->values[live_traced(t, "size()").value];
  for (size_t d = 0; d < v.sym.size(); ++d) {
    if (dim >= 0 && int64_t(d) != dim) continue;
    SymDim c = env_->canonical(v.sym[d]);
    if (!c.is_static()) env_->specialize(c, "size read by the host at " + where_str(where));
  }
}

Tensor Tracer::alias(const Tensor& t) {
  live_traced(t, "detach()");
  static const OpDef& detach = op_def("detach");
  Tensor a = call(detach, {t}, {})[0];
  a.impl().traced->detached = true;
  return a;
}

TensorList Tracer::finish(const TensorList& outputs) {
  std::vector<int> outs;
  for (const Tensor& t : outputs) {
    KILN_CHECK(t.defined(), "compile: ", options_.function_name, " returned an undefined tensor");
    outs.push_back(value_of(t));
  }
  run_segment(outs, true);
  finished_ = true;
  return outputs;
}

void Tracer::abort() {
  for (const auto& w : seg_.symbolic)
    if (auto p = w.lock(); p && p->traced) p->traced->dead = true;
  finished_ = true;
}

}  // namespace kiln
