#include "graph/guards.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <sstream>

#include "autograd/grad_mode.h"
#include "dsl/error.h"

namespace kiln {

namespace {

std::string arg_str(size_t i) { return "arg " + std::to_string(i); }
std::string on_off(bool b) { return b ? "true" : "false"; }

// How a backward traced over t treats its grad-ready hooks (dsl/traced_grad_hooks.h).
GradHooks grad_hooks_state(const Tensor& t) {
  if (!t.has_grad_ready_hooks()) return GradHooks::none;
  return active_traced_grad_hooks(t) ? GradHooks::traced : GradHooks::eager;
}

const char* name(GradHooks h) {
  switch (h) {
    case GradHooks::none: return "none";
    case GradHooks::traced: return "traced";
    case GradHooks::eager: return "eager";
  }
  return "?";
}

bool strides_match(const TensorImpl& t, const Strides& st) {
  for (size_t d = 0; d < st.size(); ++d)
    if (t.shape[d] != 1 && t.strides[d] != st[d]) return false;
  return true;
}

}  // namespace

std::vector<int> stride_order(const Strides& st) {
  std::vector<int> order(st.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return st[a] > st[b]; });
  return order;
}

bool dense_in_order(const TensorImpl& t, const std::vector<int>& order) {
  int64_t expect = 1;
  for (size_t k = order.size(); k-- > 0;) {
    int d = order[k];
    if (t.shape[d] == 1) continue;
    if (t.strides[d] != expect) return false;
    expect *= t.shape[d];
  }
  return true;
}

std::string attr_value_str(const AttrValue& v) {
  std::ostringstream os;
  std::visit([&](const auto& x) {
    using T = std::decay_t<decltype(x)>;
    if constexpr (std::is_same_v<T, std::vector<int64_t>>) os << to_string(x);
    else if constexpr (std::is_same_v<T, bool>) os << (x ? "true" : "false");
    else if constexpr (std::is_same_v<T, std::string>) os << '"' << x << '"';
    else os << x;
  }, v);
  return os.str();
}

TraceModes TraceModes::current() { return {grad_enabled(), autocast_states()}; }

GuardSet::GuardSet(const TensorList& args, const std::vector<SymShape>& arg_shapes,
                   const std::vector<AttrValue>& statics, const TraceModes& modes, const TensorList& captured,
                   std::vector<std::string> captured_names)
    : statics_(statics), modes_(modes), captured_(captured), captured_names_(std::move(captured_names)) {
  captured_names_.resize(captured_.size());
  for (size_t c = 0; c < captured_.size(); ++c)
    if (captured_names_[c].empty()) captured_names_[c] = "captured tensor " + std::to_string(c);
  std::map<int, int> dense_id;  // root symbol -> 0, 1, ...
  for (size_t i = 0; i < args.size(); ++i) {
    const TensorImpl& t = args[i].impl();
    TensorGuard g;
    g.dtype = t.dtype;
    g.device = args[i].device();
    g.requires_grad = args[i].requires_grad();
    bool any_symbolic = false;
    for (size_t d = 0; d < t.shape.size(); ++d) {
      const SymDim& s = arg_shapes[i][d];
      if (s.is_static()) {
        g.sizes.push_back(s.coeff);
        g.symbols.push_back(-1);
        continue;
      }
      KILN_CHECK(s.syms.size() == 1 && s.coeff == 1 && !s.opaque, "guards: arg ", i, " dim ", d,
                 " has symbolic size ", s.str(), "; an argument's dim is a single symbol");
      auto [it, fresh] = dense_id.try_emplace(s.syms[0], int(dense_id.size()));
      g.sizes.push_back(-1);
      g.symbols.push_back(it->second);
      any_symbolic = true;
    }
    if (!any_symbolic) {
      g.layout = TensorGuard::Layout::exact;
      g.strides = t.strides;
    } else if (args[i].is_contiguous()) {
      g.layout = TensorGuard::Layout::contiguous;
    } else {
      g.layout = TensorGuard::Layout::dense;
      g.order = stride_order(t.strides);
      KILN_CHECK(dense_in_order(t, g.order), "guards: arg ", i, " is not dense (strides ", to_string(t.strides),
                 ") and cannot have symbolic sizes");
    }
    tensors_.push_back(std::move(g));
  }
  symbol_count_ = int(dense_id.size());
  for (const Tensor& c : captured_) {
    captured_requires_grad_.push_back(c.requires_grad());
    captured_grad_hooks_.push_back(grad_hooks_state(c));
    captured_traced_hooks_.push_back(active_traced_grad_hooks(c));
  }
}

bool GuardSet::check(const TensorList& args, const std::vector<AttrValue>& statics, std::string* why) const {
  auto fail = [&](auto&&... parts) {
    if (why) {
      std::ostringstream os;
      (os << ... << parts);
      *why = os.str();
    }
    return false;
  };
  if (args.size() != tensors_.size())
    return fail("number of tensor arguments: ", tensors_.size(), " -> ", args.size());
  if (grad_enabled() != modes_.grad_mode)
    return fail("grad mode: ", on_off(modes_.grad_mode), " -> ", on_off(grad_enabled()));
  if (AutocastStates now = autocast_states(); now != modes_.autocast)
    return fail("autocast: ", modes_.autocast.str(), " -> ", now.str());
  int64_t small[16];
  std::vector<int64_t> large;
  int64_t* sym = small;
  if (symbol_count_ > 16) {
    large.resize(size_t(symbol_count_));
    sym = large.data();
  }
  std::fill(sym, sym + symbol_count_, int64_t(-1));
  auto first_use = [&](int s) {  // only for the message
    for (size_t i = 0; i < tensors_.size(); ++i)
      for (size_t d = 0; d < tensors_[i].symbols.size(); ++d)
        if (tensors_[i].symbols[d] == s) return std::pair<int, int>(int(i), int(d));
    return std::pair<int, int>(-1, -1);
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const TensorGuard& g = tensors_[i];
    const TensorImpl& t = args[i].impl();
    if (t.dtype != g.dtype) return fail(arg_str(i), " dtype: ", g.dtype, " -> ", t.dtype);
    if (args[i].device() != g.device) return fail(arg_str(i), " device: ", g.device, " -> ", args[i].device());
    if (t.shape.size() != g.sizes.size())
      return fail(arg_str(i), " rank: ", g.sizes.size(), " -> ", t.shape.size(), " (shape ", to_string(t.shape), ")");
    if (args[i].requires_grad() != g.requires_grad)
      return fail(arg_str(i), " requires_grad: ", on_off(g.requires_grad), " -> ", on_off(!g.requires_grad));
    for (size_t d = 0; d < g.sizes.size(); ++d) {
      int64_t n = t.shape[d];
      if (g.symbols[d] < 0) {
        if (n != g.sizes[d]) return fail(arg_str(i), " dim ", d, ": ", g.sizes[d], " -> ", n);
        continue;
      }
      if (n < 2) return fail(arg_str(i), " dim ", d, ": symbolic -> ", n, " (sizes 0 and 1 are always specialized)");
      int s = g.symbols[d];
      if (sym[s] < 0) {
        sym[s] = n;
      } else if (sym[s] != n) {
        auto [fi, fd] = first_use(s);
        return fail(arg_str(i), " dim ", d, " == arg ", fi, " dim ", fd, ": ", n, " != ", sym[s]);
      }
    }
    switch (g.layout) {
      case TensorGuard::Layout::contiguous:
        if (!args[i].is_contiguous()) return fail(arg_str(i), " layout: contiguous -> strides ", to_string(t.strides));
        break;
      case TensorGuard::Layout::dense:
        if (!dense_in_order(t, g.order))
          return fail(arg_str(i), " layout: dense in stride order ", to_string(std::vector<int64_t>(g.order.begin(), g.order.end())),
                      " -> strides ", to_string(t.strides));
        break;
      case TensorGuard::Layout::exact:
        if (!strides_match(t, g.strides))
          return fail(arg_str(i), " strides: ", to_string(g.strides), " -> ", to_string(t.strides));
        break;
    }
  }
  if (statics.size() != statics_.size())
    return fail("number of static arguments: ", statics_.size(), " -> ", statics.size());
  for (size_t k = 0; k < statics.size(); ++k)
    if (!(statics[k] == statics_[k]))
      return fail("static arg ", k, ": ", attr_value_str(statics_[k]), " -> ", attr_value_str(statics[k]));
  for (size_t c = 0; c < captured_.size(); ++c) {
    if (captured_[c].requires_grad() != captured_requires_grad_[c])
      return fail(captured_names_[c], " requires_grad: ", on_off(captured_requires_grad_[c]), " -> ",
                  on_off(!captured_requires_grad_[c]));
    if (GradHooks now = grad_hooks_state(captured_[c]); now != captured_grad_hooks_[c])
      return fail(captured_names_[c], " grad-ready hooks: ", name(captured_grad_hooks_[c]), " -> ", name(now));
    // Traced hooks are baked into the graph (a DistributedDataParallel's group and buckets): the
    // same ones, alive.
    if (captured_grad_hooks_[c] == GradHooks::traced &&
        captured_traced_hooks_[c].lock() != active_traced_grad_hooks(captured_[c]))
      return fail(captured_names_[c], " grad-ready hooks: traced by other hooks (a new DistributedDataParallel)");
  }
  return true;
}

std::vector<std::pair<int, int>> GuardSet::size_changes(const TensorList& args) const {
  std::vector<std::pair<int, int>> out;
  for (size_t i = 0; i < args.size() && i < tensors_.size(); ++i) {
    const TensorGuard& g = tensors_[i];
    const Shape& s = args[i].impl().shape;
    if (s.size() != g.sizes.size() || args[i].dtype() != g.dtype) continue;
    for (size_t d = 0; d < s.size(); ++d)
      if (g.symbols[d] < 0 && s[d] != g.sizes[d]) out.emplace_back(int(i), int(d));
  }
  return out;
}

std::vector<std::string> GuardSet::describe() const {
  std::vector<std::string> out;
  out.push_back(std::string("grad mode is ") + (modes_.grad_mode ? "on" : "off"));
  out.push_back("autocast is " + modes_.autocast.str());
  std::vector<std::string> first(static_cast<size_t>(symbol_count_));
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const TensorGuard& g = tensors_[i];
    std::ostringstream os;
    os << arg_str(i) << ": " << g.dtype << " on " << g.device << ", rank " << g.sizes.size() << ", sizes [";
    for (size_t d = 0; d < g.sizes.size(); ++d) {
      os << (d ? ", " : "");
      if (g.symbols[d] < 0) {
        os << g.sizes[d];
      } else {
        os << 's' << g.symbols[d];
        if (first[g.symbols[d]].empty()) first[g.symbols[d]] = arg_str(i) + " dim " + std::to_string(d);
      }
    }
    os << "], ";
    switch (g.layout) {
      case TensorGuard::Layout::contiguous: os << "contiguous"; break;
      case TensorGuard::Layout::dense: os << "dense in stride order " << to_string(std::vector<int64_t>(g.order.begin(), g.order.end())); break;
      case TensorGuard::Layout::exact: os << "strides " << to_string(g.strides); break;
    }
    os << ", requires_grad " << on_off(g.requires_grad);
    out.push_back(os.str());
  }
  for (int s = 0; s < symbol_count_; ++s)
    out.push_back(std::string("s").append(std::to_string(s)).append(" >= 2 (first seen at ").append(first[s]).append(")"));
  for (size_t k = 0; k < statics_.size(); ++k)
    out.push_back("static arg " + std::to_string(k) + " == " + attr_value_str(statics_[k]));
  for (size_t c = 0; c < captured_.size(); ++c)
    out.push_back(captured_names_[c] + " " + to_string(captured_[c].impl().shape) + ", requires_grad " +
                  on_off(captured_requires_grad_[c]) +
                  (captured_grad_hooks_[c] == GradHooks::none ? "" : std::string(", grad-ready hooks ") +
                                                                      name(captured_grad_hooks_[c])));
  return out;
}

}  // namespace kiln
