#include "aot/export.h"

#include <chrono>
#include <climits>
#include <filesystem>
#include <optional>
#include <set>
#include <sstream>

#include "aot/manifest.h"
#include "autograd/grad_mode.h"
#include "dsl/atomic_file.h"
#include "dsl/error.h"
#include "dsl/nn/state_dict.h"
#include "graph/compile.h"
#include "graph/logs.h"
#include "schedules/object_export.h"
#include "schedules/shared_library.h"

namespace kiln::aot {

namespace {

// `where` names the declaration in errors: DYNAMIC "x:0:2..512".
int64_t parse_size(const std::string& text, const std::string& what, const std::string& where) {
  KILN_CHECK(!text.empty() && text.size() <= 18 && text.find_first_not_of("0123456789") == std::string::npos, where,
             ": ", what, " '", text, "' is not a non-negative integer");
  return std::stoll(text);
}

std::string quoted(const char* keyword, const std::string& text) { return std::string(keyword) + " \"" + text + "\""; }

// The position of the input named `name`.
int input_position(const Program& p, const std::string& name, const std::string& where) {
  std::string names;
  for (size_t k = 0; k < p.inputs.size(); ++k) {
    if (p.inputs[k].name == name) return int(k);
    names += (k ? ", " : "") + p.inputs[k].name;
  }
  throw_error(where, ": the program has no input '", name, "' (its inputs: ", names, ")");
}

void check_program(const Program& p, const ExportOptions& o) {
  KILN_CHECK(is_c_identifier(o.name), "export: the model name '", o.name,
             "' is not a C++ identifier (it names the generated namespace and files)");
  KILN_CHECK(bool(p.forward), "export ", o.name, ": the program has no forward function");
  KILN_CHECK(!p.inputs.empty(), "export ", o.name, ": the program has no inputs");
  std::set<std::string> names;
  for (const ProgramInput& in : p.inputs) {
    KILN_CHECK(is_c_identifier(in.name), "export ", o.name, ": input name '", in.name, "' is not a C++ identifier");
    KILN_CHECK(names.insert(in.name).second, "export ", o.name, ": two inputs are named '", in.name, "'");
    KILN_CHECK(in.example.defined(), "export ", o.name, ": input ", in.name, " has no example tensor");
  }
  KILN_CHECK(!p.optimizer || p.module, "export ", o.name, ": a training step's program needs the module its "
             "optimizer updates");
}

// The manifest's dynamic ranges, each checked against its input's example.
std::vector<DynamicRange> dynamic_ranges(const Program& p, const ExportOptions& o) {
  std::vector<DynamicRange> out;
  for (const DynamicDim& d : o.dynamic) {
    std::string where = quoted("DYNAMIC", d.text());
    DynamicRange r{input_position(p, d.input, where), d.dim, d.min, d.max};
    const Tensor& example = p.inputs[size_t(r.input)].example;
    KILN_CHECK(d.dim >= 0 && d.dim < example.dim(), where, ": input ", d.input, " has ", example.dim(), " dims ",
               to_string(example.shape()));
    int64_t size = example.shape()[size_t(d.dim)];
    KILN_CHECK(size >= d.min && size <= d.max, where, ": the example's size ", size,
               " is outside the range; trace with an example inside it");
    for (const DynamicRange& other : out)
      KILN_CHECK(other.input != r.input || other.dim != r.dim, where, ": the dim is declared twice");
    out.push_back(r);
  }
  return out;
}

// What an AOT model can run: a graph of arguments and weights, laid out densely, that writes
// only weights in place, whose declared dynamic dims stayed symbolic.
void check_graph(const Graph& g, const Program& p, const ExportOptions& o, const std::vector<DynamicRange>& ranges) {
  std::set<std::string> params;
  for (const auto& [name, t] : program_weights(p)) params.insert(name);
  for (const auto& [output, input] : g.writes)
    KILN_CHECK(g.inputs[size_t(input)].kind == InputKind::captured, "export ", o.name, ": the function writes its "
               "input ", p.inputs[size_t(g.inputs[size_t(input)].index)].name, " in place; an AOT model writes only "
               "its weights");
  for (const GraphInput& in : g.inputs) {
    const Value& v = g.values[size_t(in.value)];
    std::string what = (in.kind == InputKind::argument ? "input " + p.inputs[size_t(in.index)].name : "'" + in.name + "'") +
                       " (" + std::string(name(v.meta.dtype)) + " " + to_string(v.meta.shape) + ")";
    KILN_CHECK(in.kind != InputKind::captured || params.count(in.name), "export ", o.name,
               ": the function reads a tensor from its enclosing scope that is not a parameter of the program's "
               "module nor its optimizer's state: ", what, "; make it a parameter, or create it inside the function");
    KILN_CHECK(in.kind == InputKind::argument || in.kind == InputKind::captured, "export ", o.name, ": graph input ",
               what, " is of kind ", name(in.kind));
    KILN_CHECK(is_contiguous(v.meta.shape, v.strides) && v.offset == 0, "export ", o.name, ": ", what,
               " was traced with strides ", to_string(v.strides), " at offset ", v.offset,
               "; AOT models take contiguous tensors");
  }
  for (const DynamicRange& r : ranges) {
    for (const GraphInput& in : g.inputs) {
      if (in.kind != InputKind::argument || in.index != r.input) continue;
      SymDim d = g.shape_env->canonical(g.values[size_t(in.value)].sym[size_t(r.dim)]);
      if (!d.is_static()) continue;
      std::string why;
      for (const Symbol& s : g.shape_env->symbols())
        if (s.specialized && s.source == "arg " + std::to_string(r.input) + " dim " + std::to_string(r.dim)) why = s.why;
      throw_error("export ", o.name, ": input ", p.inputs[size_t(r.input)].name, " dim ", r.dim,
                  " is declared DYNAMIC, but the function needs it to be ", d.coeff,
                  why.empty() ? std::string() : " (" + why + ")");
    }
  }
}

}  // namespace

std::string DynamicDim::text() const {
  return input + ":" + std::to_string(dim) + ":" + std::to_string(min) + ".." + std::to_string(max);
}

DynamicDim parse_dynamic_dim(const std::string& text) {
  size_t a = text.find(':');
  size_t b = a == std::string::npos ? a : text.find(':', a + 1);
  size_t dots = b == std::string::npos ? b : text.find("..", b + 1);
  std::string where = quoted("DYNAMIC", text);
  KILN_CHECK(dots != std::string::npos, where,
             ": expected input:dim:min..max, e.g. \"x:0:2..512\" (input x, dim 0, sizes 2 to 512)");
  DynamicDim d;
  d.input = text.substr(0, a);
  d.dim = int(parse_size(text.substr(a + 1, b - a - 1), "the dim", where));
  d.min = parse_size(text.substr(b + 1, dots - b - 1), "the minimum", where);
  d.max = parse_size(text.substr(dots + 2), "the maximum", where);
  KILN_CHECK(d.min >= 2, where, ": the minimum must be at least 2 (kiln specializes sizes 0 and 1, "
             "as torch.compile does; build a second model for size 1)");
  KILN_CHECK(d.min <= d.max && d.max <= INT32_MAX, where, ": needs min <= max <= 2^31 - 1");
  return d;
}

std::string Specialization::text() const {
  std::string dim_text = input + "." + std::to_string(dim);
  return modulus > 0 ? dim_text + " % " + std::to_string(modulus) + " == " + std::to_string(value)
                     : dim_text + " == " + std::to_string(value);
}

Specialization parse_specialization(const std::string& text) {
  std::string t;
  for (char c : text)
    if (c != ' ') t += c;
  size_t dot = t.find('.'), eq = t.find("==");
  size_t mod = t.find('%');
  KILN_CHECK(dot != std::string::npos && eq != std::string::npos && dot < eq && (mod == std::string::npos || mod < eq),
             quoted("SPECIALIZE", text), ": expected input.dim == value or input.dim % modulus == value, e.g. "
             "\"x.1 % 64 == 0\"");
  Specialization s;
  s.input = t.substr(0, dot);
  size_t dim_end = mod == std::string::npos ? eq : mod;
  std::string where = quoted("SPECIALIZE", text);
  s.dim = int(parse_size(t.substr(dot + 1, dim_end - dot - 1), "the dim", where));
  if (mod != std::string::npos) s.modulus = parse_size(t.substr(mod + 1, eq - mod - 1), "the modulus", where);
  s.value = parse_size(t.substr(eq + 2), "the value", where);
  KILN_CHECK(mod == std::string::npos || (s.modulus >= 2 && s.value < s.modulus), "SPECIALIZE \"", text,
             "\": needs a modulus of at least 2 and a value below it");
  return s;
}

namespace {

// The export's targets: none for this machine's CPU alone; CPU targets, best first; or one CUDA
// target ("host-cuda": this machine's CPU for the host side, PTX for compute capability 8.0 as the
// JIT builds it), which makes a CUDA model.
std::vector<Halide::Target> export_targets(const ExportOptions& o) {
  if (o.targets.empty() || (o.targets.size() == 1 && o.targets[0] == "host")) return {};
  std::vector<Halide::Target> out;
  for (const std::string& t : o.targets) {
    KILN_CHECK(t == "host" || Halide::Target::validate_target_string(t), "TARGETS ", t,
               ": not a Halide target (e.g. host, host-cuda, x86-64-linux-avx2-fma-f16c-sse41)");
    Halide::Target target = t == "host" ? aot_target(false) : t == "host-cuda" ? aot_target(true) : Halide::Target(t);
    if (target.has_gpu_feature()) {
      KILN_CHECK(target.has_feature(Halide::Target::CUDA), "TARGETS ", t,
                 ": kiln builds GPU models for CUDA only (host-cuda, or a target with the cuda feature)");
      KILN_CHECK(o.targets.size() == 1, "TARGETS ", t, ": a CUDA model is built for one target; build a second "
                 "model for the CPU");
      if (target.get_cuda_capability_lower_bound() < 30) target = target.with_feature(Halide::Target::CUDACapability80);
    }
    KILN_CHECK(out.empty() || (target.arch == out[0].arch && target.os == out[0].os && target.bits == out[0].bits),
               "TARGETS ", t, ": every target needs the same architecture, OS and bits as ", out[0].to_string());
    out.push_back(target.with_feature(Halide::Target::NoRuntime));
  }
  return out;
}

}  // namespace

ExportedModel export_program(const Program& program, const ExportOptions& options) {
  check_program(program, options);
  std::vector<Halide::Target> targets = export_targets(options);
  bool cuda = !targets.empty() && targets[0].has_feature(Halide::Target::CUDA);
  std::vector<DynamicRange> ranges = dynamic_ranges(program, options);
  std::vector<SizeCondition> conditions;
  for (const Specialization& sp : options.specialize) {
    std::string spec = sp.text();
    int input = input_position(program, sp.input, quoted("SPECIALIZE", spec));
    const DynamicRange* range = nullptr;
    for (const DynamicRange& r : ranges)
      if (r.input == input && r.dim == sp.dim) range = &r;
    KILN_CHECK(range, "SPECIALIZE \"", spec, "\": input ", sp.input, " dim ", sp.dim,
               " is not declared DYNAMIC (a static size needs no specialization)");
    KILN_CHECK(sp.modulus > 0 || (sp.value >= range->min && sp.value <= range->max), "SPECIALIZE \"", spec,
               "\": ", sp.value, " is outside the dim's range ", range->min, "..", range->max);
    conditions.push_back({input, sp.dim, sp.modulus, sp.value, spec});
  }
  auto t0 = std::chrono::steady_clock::now();

  // The examples as fresh tensors over the same data: dims declared dynamic marked so, the
  // others static (no automatic dynamic shapes: a model's sizes are what it declares).
  TensorList examples;
  for (size_t k = 0; k < program.inputs.size(); ++k) {
    Tensor e = program.inputs[k].example.detach();
    for (int64_t d = 0; d < e.dim(); ++d) mark_static(e, d);
    for (const DynamicRange& r : ranges)
      if (r.input == int(k)) mark_dynamic(e, r.dim);
    examples.push_back(e);
  }
  CompileOptions co;
  co.backend = "halide";
  co.fullgraph = true;
  co.name = options.name;
  detail::CompiledCore core([&](const TensorList& ts, const std::vector<AttrValue>&) { return program.forward(ts); },
                            co, program.module.get());
  std::vector<std::pair<std::string, Tensor>> weights = program_weights(program);
  if (program.module) core.name_captured({weights.begin() + long(program.module->named_parameters().size()), weights.end()});
  // A CUDA model is traced where its examples are (the CPU: building it needs no GPU), and its
  // graph compiled for the device.
  if (cuda) {
    for (const ProgramInput& in : program.inputs)
      KILN_CHECK(!in.example.device().is_cuda(), "export ", options.name, ": input ", in.name, " is on ",
                 in.example.device(), "; a CUDA model is traced on the CPU (give CPU examples and weights)");
    core.compile_for(Device::cuda(0));
  }
  // Tracing runs the function once: a training step would update the weights, which go back to
  // what they were.
  TensorList before;
  for (const auto& [name, t] : weights) before.push_back(t.detach().clone());
  ObjectExport exporting(options.dir, options.name, conditions, targets);
  TensorList outputs;
  {
    std::optional<NoGradGuard> inference;
    std::optional<EnableGradGuard> training;
    if (program.optimizer) training.emplace();
    else inference.emplace();
    outputs = core.call(examples, {});
  }
  {
    NoGradGuard no_grad;
    for (size_t i = 0; i < weights.size(); ++i) weights[i].second.detach().copy_(before[i]);
  }
  GraphEffects effects = core.last_effects();
  KILN_CHECK(!exporting.graphs().empty(), "export ", options.name,
             ": the function computes nothing kiln compiles (its graph has no ops)");
  KILN_CHECK(exporting.graphs().size() == 1, "export ", options.name, ": the function compiled into ",
             exporting.graphs().size(), " graphs; an AOT model is one graph");
  const ExportedGraph& eg = exporting.graphs()[0];
  check_graph(*eg.graph, program, options, ranges);
  KILN_CHECK(effects.grads.empty(), "export ", options.name, ": the step leaves gradients on ", effects.grads.size(),
             " parameters; call the optimizer's zero_grad() inside it (an AOT model keeps no gradients)");
  // A weight read through two views (a parameter, and the optimizer's p.detach()) is two graph
  // inputs: one written output may be listed for both.
  std::set<int> written;
  for (const auto& [output, input] : eg.graph->writes) written.insert(output);
  KILN_CHECK(effects.writes.size() == written.size() && eg.graph->outputs.size() == outputs.size() + written.size(),
             "export ", options.name, ": the graph has ", eg.graph->outputs.size(), " outputs, ", written.size(),
             " of them written back; the function returned ", outputs.size(), " and writes ", effects.writes.size(),
             " tensors");

  ExportedModel m;
  m.name = options.name;
  Manifest manifest{options.name, {}, {}, {}, ranges, int(outputs.size())};
  // The baseline (last) target: the one this machine must support at least.
  Halide::Target target = targets.empty() ? aot_target(eg.graph->on_cuda()) : targets.back();
  manifest.target = target.to_string();
  for (int f = 0; f < int(Halide::Target::FeatureEnd); ++f)
    if (target.has_feature(Halide::Target::Feature(f))) manifest.target_features.push_back(f);
  for (const ProgramInput& in : program.inputs) {
    manifest.inputs.push_back({in.name});
    m.input_names.push_back(in.name);
  }
  for (const SizeCondition& c : conditions) manifest.branches.push_back({c.argument, c.dim, c.modulus, c.value});
  m.manifest = write_manifest(manifest);
  m.plan = eg.plan;
  m.object = eg.object;
  m.functions = eg.functions;
  m.specialized = eg.specialized;
  for (const Specialization& sp : options.specialize) {
    bool used = false;
    for (const std::string& what : m.specialized) used = used || what.find(sp.text()) != std::string::npos;
    KILN_CHECK(used, "SPECIALIZE \"", sp.text(), "\": no compiled pipeline of ", options.name,
               " sizes by that dim (it reaches only eager steps), so there is nothing to specialize");
  }
  m.output_count = int(outputs.size());
  m.trains = program.optimizer != nullptr;
  for (const auto& [name, t] : weights) m.weights.emplace_back(name, t.detach());
  std::ostringstream summary;
  summary << "model " << options.name << (cuda ? " (CUDA)" : "") << ": " << eg.graph->op_count() << " ops, "
          << m.functions.size() << " compiled pipelines";
  if (!m.specialized.empty()) summary << " (" << m.specialized.size() << " specialize() branches)";
  summary << ", " << m.weights.size() << " weights, " << outputs.size() << " outputs; traced and "
          << "compiled in " << int(ms_since(t0)) << " ms";
  m.summary = summary.str();
  return m;
}

}  // namespace kiln::aot
