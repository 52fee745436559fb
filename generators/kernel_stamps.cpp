#include "generators/kernel_stamps.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <vector>

#include "generators/kernel_fingerprint.h"

#ifndef KILN_HALIDE_VERSION
#error "KILN_HALIDE_VERSION must name the Halide version the generators link (generators/CMakeLists.txt)"
#endif

namespace kiln {

namespace {

using namespace Halide;
using namespace Halide::Internal;

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, sep);)
    if (!part.empty()) parts.push_back(part);
  return parts;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// GeneratorBase::call_configure and build_pipeline (generate and schedule; no lowering) are
// protected: their public caller lowers the pipeline too (build_module), which would cost more
// than all the rest of this step. A using-declaration in a derived class names them publicly.
struct PipelineBuilder : GeneratorBase {
  using GeneratorBase::build_pipeline;
  using GeneratorBase::call_configure;
};

// The kernel's fingerprint text, for each of its targets.
std::string kernel_fingerprint(const std::vector<std::string>& words) {
  std::ostringstream os;
  os << "kiln eager kernel fingerprint 1, Halide " << KILN_HALIDE_VERSION << "\n";
  for (const std::string& w : words) os << w << " ";
  os << "\n";
  GeneratorParamsMap params;
  for (size_t i = 3; i < words.size(); ++i) {
    size_t eq = words[i].find('=');
    params[words[i].substr(0, eq)] = eq == std::string::npos ? std::string() : words[i].substr(eq + 1);
  }
  for (const std::string& target : split(words[2], ',')) {
    auto generator = GeneratorRegistry::create(words[1], GeneratorContext(Target(target)));
    generator->set_generator_param_values(params);
    (generator.get()->*&PipelineBuilder::call_configure)();
    os << "target " << target << "\n" << pipeline_fingerprint((generator.get()->*&PipelineBuilder::build_pipeline)());
  }
  return os.str();
}

// The first line where two texts differ, to say why a kernel is regenerated.
std::string first_difference(const std::string& before, const std::string& after) {
  std::vector<std::string> a = split(before, '\n'), b = split(after, '\n');
  for (size_t i = 0; i < b.size(); ++i) {
    if (i < a.size() && a[i] == b[i]) continue;
    std::string line = b[i].substr(0, 160);
    return "line " + std::to_string(i + 1) + " now reads: " + line;
  }
  return "lines removed";
}

}  // namespace

int update_kernel_stamps(const std::string& list_file, const std::string& stamp_dir) {
  std::ifstream list(list_file);
  if (!list) {
    std::cerr << "kiln fingerprints: cannot read the kernel list " << list_file << "\n";
    return 1;
  }
  int changed = 0, total = 0;
  for (std::string line; std::getline(list, line);) {
    std::vector<std::string> words = split(line, ' ');
    if (words.empty()) continue;
    if (words.size() < 3) {
      std::cerr << "kiln fingerprints: " << list_file << ": expected `name generator targets params...`, got `" << line << "`\n";
      return 1;
    }
    ++total;
    const std::string stamp = stamp_dir + "/" + words[0] + ".stamp";
    const std::string fresh = stamp + ".new";
    std::cout.flush();
    pid_t child = fork();
    if (child < 0) {
      std::perror("kiln fingerprints: fork");
      return 1;
    }
    if (child == 0) {  // a fresh copy of the process: Halide's name counters as at start-up
      try {
        std::ofstream out(fresh, std::ios::binary | std::ios::trunc);
        out << kernel_fingerprint(words);
        out.close();
        _exit(out ? 0 : 1);
      } catch (const std::exception& e) {
        std::cerr << "kiln fingerprints: building kernel " << words[0] << " failed: " << e.what() << "\n";
        _exit(1);
      }
    }
    int status = 0;
    waitpid(child, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::cerr << "kiln fingerprints: kernel " << words[0] << " (" << line << ") could not be described\n";
      std::remove(fresh.c_str());
      return 1;
    }
    std::string before = read_file(stamp), after = read_file(fresh);
    if (before == after) {
      std::remove(fresh.c_str());
      continue;
    }
    ++changed;
    std::cout << "kiln: regenerating " << words[0] << ": "
              << (before.empty() ? std::string("new kernel") : first_difference(before, after)) << "\n";
    if (std::rename(fresh.c_str(), stamp.c_str()) != 0) {
      std::perror(("kiln fingerprints: rename " + fresh).c_str());
      return 1;
    }
  }
  std::cout << "kiln: " << list_file.substr(list_file.find_last_of('/') + 1) << ": " << changed << " of " << total
            << " kernels changed\n";
  return 0;
}

}  // namespace kiln
