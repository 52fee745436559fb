#include "schedules/shared_library.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>

#include "dsl/cuda/cuda_context.h"
#include "dsl/cuda/halide_device_memory.h"
#include "dsl/eager/kernel_call.h"
#include "dsl/error.h"
#include "dsl/profiler.h"
#include "graph/logs.h"
#include "schedules/disk_cache.h"
#include "schedules/jit_target.h"
#include "schedules/pipeline_memory.h"
#include "dsl/settings.h"

namespace kiln {

namespace {

// The quoted command's output and exit status.
std::pair<int, std::string> run_command(const std::string& command) {
  std::string output;
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  KILN_CHECK(p, "halide backend: cannot run '", command, "'");
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) output.append(buf, n);
  int status = ::pclose(p);
  return {status, output};
}

std::string quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Runs the system C compiler over objects into `out`; `what` names the step in its error.
void run_linker(const std::string& flags, const std::vector<std::string>& objects, const std::string& out,
                const std::string& what) {
  std::string command = setting("CC").value_or("cc") + " " + flags + " -o " + quoted(out);
  for (const std::string& o : objects) command += " " + quoted(o);
  auto [status, output] = run_command(command);
  KILN_CHECK(status == 0, "halide backend: ", what, " failed (", command, "):\n", output,
             "kiln links compiled pipelines with the system C compiler (set CC, or KILN_CACHE=0 to use "
             "Halide's JIT without the disk cache)");
}

template <typename F>
F symbol(void* handle, const char* name, const std::string& path) {
  void* f = ::dlsym(handle, name);
  KILN_CHECK(f, "halide backend: '", path, "' has no symbol ", name);
  return reinterpret_cast<F>(f);
}

const halide_device_interface_t* cuda_interface = nullptr;

// The standalone runtime: built into the disk cache on first use, loaded once with RTLD_GLOBAL
// so every cached library's halide_* calls bind to it.
void load_runtime() {
  static std::once_flag once;
  std::call_once(once, [] {
    CompilePhase phase("Halide runtime load");
    Halide::Target t = aot_target(true).without_feature(Halide::Target::NoRuntime);
    std::string key = cache_key({"halide-runtime", t.to_string()});
    std::string path = find_cache_entry(key, ".so");
    if (path.empty()) {
      auto dir = std::filesystem::temp_directory_path() / ("kiln-runtime-" + key + "-" + std::to_string(::getpid()));
      std::filesystem::create_directories(dir);
      Halide::compile_standalone_runtime((dir / "runtime.o").string(), t);
      link_shared_library({(dir / "runtime.o").string()}, (dir / "runtime.so").string());
      path = store_cache_entry(key, ".so", (dir / "runtime.so").string());
      std::filesystem::remove_all(dir);
      log_line(LogChannel::output_code, "halide: built the standalone runtime for " + t.to_string() + " into " + path);
    }
    void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
    KILN_CHECK(h, "halide backend: cannot load the Halide runtime '", path, "': ", ::dlerror());
    symbol<void* (*)(void* (*)(void*, size_t))>(h, "halide_set_custom_malloc", path)(&pipeline_malloc);
    symbol<void* (*)(void (*)(void*, void*))>(h, "halide_set_custom_free", path)(&pipeline_free);
    symbol<void* (*)(void (*)(void*, const char*))>(h, "halide_set_error_handler", path)(&capture_halide_error);
    symbol<void* (*)(int (*)(void*, void**, bool))>(h, "halide_set_cuda_acquire_context", path)(&kiln_cuda_acquire_context);
    symbol<void* (*)(int (*)(void*))>(h, "halide_set_cuda_release_context", path)(&kiln_cuda_release_context);
    symbol<void* (*)(int (*)(void*, void*, void**))>(h, "halide_set_cuda_get_stream", path)(&kiln_cuda_get_stream);
    symbol<int (*)(void*, bool)>(h, "halide_reuse_device_allocations", path)(nullptr, true);
    symbol<void* (*)(void* (*)(void*, const char*))>(h, "halide_set_custom_get_library_symbol", path)(
        &kiln_halide_get_library_symbol);
    // One thread pool for the process: the pipelines' parallel loops run on the eager kernels'
    // runtime (linked into kiln), so a pipeline's idle workers never spin beside a GEMM's.
    symbol<halide_do_par_for_t (*)(halide_do_par_for_t)>(h, "halide_set_custom_do_par_for", path)(&halide_do_par_for);
    cuda_interface = symbol<const halide_device_interface_t* (*)()>(h, "halide_cuda_device_interface", path)();
  });
}

}  // namespace

Halide::Target aot_target(bool cuda) {
  Halide::Target t = jit_target().without_feature(Halide::Target::JIT).with_feature(Halide::Target::NoRuntime);
  return cuda ? t.with_feature(Halide::Target::CUDA).with_feature(Halide::Target::CUDACapability80) : t;
}

const halide_device_interface_t* runtime_cuda_interface() {
  load_runtime();
  return cuda_interface;
}

void compile_region_object(Halide::Pipeline& pipeline, const std::vector<Halide::Argument>& args,
                           const std::string& function, const std::string& object_path, bool cuda) {
  pipeline.compile_to_object(object_path, args, function, aot_target(cuda));
}

std::vector<std::string> compile_region_objects(Halide::Pipeline& pipeline, const std::vector<Halide::Argument>& args,
                                                const std::string& function, const std::string& object_path,
                                                const std::vector<Halide::Target>& targets) {
  KILN_CHECK(!targets.empty(), "compile_region_objects: no targets");
  std::vector<Halide::Target> no_runtime;
  std::vector<std::string> suffixes;
  for (const Halide::Target& t : targets) {
    no_runtime.push_back(t.with_feature(Halide::Target::NoRuntime));
    suffixes.push_back("t" + std::to_string(suffixes.size()));
  }
  Halide::compile_multitarget(function, {{Halide::OutputFileType::object, object_path}}, no_runtime, suffixes,
                              [&](const std::string& name, const Halide::Target& t) {
                                return pipeline.compile_to_module(args, name, t);
                              });
  if (targets.size() == 1) return {object_path};
  // Halide's names: <stem>-<suffix>.o per target, <stem>_wrapper.o.
  std::string stem = object_path.substr(0, object_path.size() - 2);
  std::vector<std::string> out;
  for (const std::string& s : suffixes) out.push_back(stem + "-" + s + ".o");
  out.push_back(stem + "_wrapper.o");
  return out;
}

void link_shared_library(const std::vector<std::string>& objects, const std::string& library_path) {
  run_linker("-shared", objects, library_path, "linking a shared library");
}

void link_relocatable_object(const std::vector<std::string>& objects, const std::string& object_path) {
  std::string temporary = object_path + ".partial";
  run_linker("-r -nostdlib", objects, temporary, "combining objects");
  std::filesystem::rename(temporary, object_path);
}

void write_empty_object(const std::string& object_path) {
  std::string temporary = object_path + ".partial";
  run_linker("-c -x c /dev/null", {}, temporary, "compiling an empty object");
  std::filesystem::rename(temporary, object_path);
}

SharedLibrary::SharedLibrary(const std::string& path) : path_(path) {
  load_runtime();
  void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  KILN_CHECK(h, "halide backend: cannot load '", path, "': ", ::dlerror());
  handle_ = std::shared_ptr<void>(h, [](void* p) { ::dlclose(p); });
}

RegionFunction SharedLibrary::function(const std::string& name) const {
  return symbol<RegionFunction>(handle_.get(), (name + "_argv").c_str(), path_);
}

}  // namespace kiln
