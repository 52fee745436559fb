#include "schedules/autoschedulers.h"

#include <cctype>
#include <filesystem>
#include <mutex>
#include <set>
#include <thread>

#include "dsl/error.h"
#include "schedules/jit_target.h"

namespace kiln {

namespace {

// Where Debian's libhalide14 puts the plugins (the one path this file knows of the system).
constexpr const char* kPluginDir = "/usr/lib/x86_64-linux-gnu/halide14";

void load(const std::string& name) {
  static std::mutex mu;
  static std::set<std::string> loaded;
  std::lock_guard<std::mutex> lock(mu);
  if (loaded.count(name)) return;
  std::string path = std::string(kPluginDir) + "/libautoschedule_" + name + ".so";
  KILN_CHECK(std::filesystem::exists(path), "scheduler '", name, "': Halide's plugin ", path,
             " is missing (Debian's libhalide14-0-dev ships it)");
  Halide::load_plugin(path);
  loaded.insert(name);
}

}  // namespace

std::vector<std::string> halide_autoscheduler_names() { return {"mullapudi2016", "adams2019", "li2018"}; }

std::string apply_halide_autoscheduler(const std::string& name, const Graph& g, const Region& r,
                                       LoweredRegion& lowered, Halide::Pipeline& pipeline) {
  auto names = halide_autoscheduler_names();
  KILN_CHECK(std::find(names.begin(), names.end(), name) != names.end(), "compile: unknown scheduler '", name,
             "' (kiln, mullapudi2016, adams2019, li2018)");
  load(name);
  auto estimates = [&](const Shape& s) {  // the traced sizes
    Halide::Region region;
    for (size_t d = s.size(); d-- > 0;) region.push_back({0, int32_t(s[d])});
    return region;
  };
  for (size_t k = 0; k < r.inputs.size(); ++k) lowered.inputs[k].set_estimates(estimates(region_input_shape(g, r, k)));
  for (size_t k = 0; k < lowered.outputs.size(); ++k)
    lowered.outputs[k].set_estimates(estimates(g.values[size_t(lowered.output_values[k])].meta.shape));
  for (auto& [sym, p] : lowered.symbols) p.set_estimate(int32_t(g.shape_env->symbol(sym).hint));
  int cores = int(std::max(1u, std::thread::hardware_concurrency()));
  Halide::MachineParams machine(cores, 32ull << 20, 40);
  try {
    std::string registered = name;  // Halide 14 registers "Mullapudi2016", "Adams2019", "Li2018"
    registered[0] = char(std::toupper(static_cast<unsigned char>(registered[0])));
    return pipeline.auto_schedule(registered, jit_target(), machine).schedule_source;
  } catch (const Halide::Error& e) {
    throw_error("scheduler '", name, "' failed: ", e.what());
  }
}

}  // namespace kiln
