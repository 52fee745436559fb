#include "aot/program.h"

#include <map>

#include "dsl/error.h"

namespace kiln::aot {

std::vector<std::pair<std::string, Tensor>> program_weights(const Program& p) {
  std::vector<std::pair<std::string, Tensor>> out;
  std::map<const TensorImpl*, std::string> names;
  if (p.module)
    for (auto& [name, t] : p.module->named_parameters()) {
      names[&t.impl()] = name;
      out.emplace_back(name, t);
    }
  if (!p.optimizer) return out;
  const std::vector<Tensor>& params = p.optimizer->params();
  for (auto& [state, t] : p.optimizer->state()) {
    // "exp_avg.3" -> "optimizer.exp_avg.<parameter 3's name>"; "step" -> "optimizer.step".
    size_t dot = state.find('.');
    std::string name = "optimizer." + state;
    if (dot != std::string::npos) {
      size_t i = std::stoul(state.substr(dot + 1));
      KILN_CHECK(i < params.size(), "program_weights: optimizer state '", state, "' names parameter ", i, " of ",
                 params.size());
      auto it = names.find(&params[i].impl());
      KILN_CHECK(it != names.end(), "program_weights: the optimizer's parameter ", i,
                 " is not a parameter of the program's module");
      name = "optimizer." + state.substr(0, dot) + "." + it->second;
    }
    out.emplace_back(name, t);
  }
  return out;
}

}  // namespace kiln::aot
