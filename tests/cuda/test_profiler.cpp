// The profiler with CUDA activity (dsl/profiler.h, dsl/cuda/cupti_activity.h): eager ops (a
// Halide kernel and a cuBLAS GEMM) and a compiled function on the device under
// Profiler({.cuda = true}); every kernel, copy and memset comes back as a device event with
// non-negative times inside the profile's window, each kernel linked to the host event that
// launched it (which starts before it runs); the regions of a compiled call
// launch kernels; the Chrome trace parses, names the device and its streams and draws an arrow
// per launch; the table gives device times.
#include <boost/property_tree/json_parser.hpp>
#include <boost/property_tree/ptree.hpp>

#include <unistd.h>

#include <filesystem>
#include <map>

#include "cuda/cuda_available.h"
#include "dsl/cuda/cupti_activity.h"
#include "support/reference.h"

using namespace kiln;
using namespace kiln::test;

BOOST_AUTO_TEST_CASE(device_events_link_to_the_host_events_that_launched_them, *needs(cupti_unavailable_reason)) {
  Tensor x = random_tensor({512, 1024}, DType::f32, 3).to(kCuda);
  auto f = compile([](const Tensor& a) { return softmax(tanh(a) * 2.0, -1); }, {.backend = "halide"});
  f(x);  // compiled, cached and run once before the profile
  cuda_synchronize();
  Profiler p({.cuda = true});
  {
    RecordFunction r("eager");
    Tensor y = exp(x) + x;
    Tensor z = matmul(y, x.t());        // cuBLAS, launched through the CUDA runtime
    Tensor host = z.to(Device::cpu());  // a device-to-host copy
  }
  {
    RecordFunction r("compiled");
    for (int i = 0; i < 3; ++i) f(x);
  }
  cuda_synchronize();
  p.stop();
  const std::vector<ProfileEvent> ev = p.events();
  std::map<uint64_t, ProfileEvent> host;
  for (const ProfileEvent& e : ev)
    if (e.device < 0 && e.id) host[e.id] = e;
  std::map<std::string, int> kinds, launchers, launching_ops;
  int linked = 0;  // device events whose launching host event is in the profile
  for (const ProfileEvent& e : ev) {
    if (e.device < 0) continue;
    ++kinds[e.category];
    linked += host.count(e.launched_by) > 0;
    BOOST_TEST(e.device == 0);
    BOOST_TEST(e.duration_us >= 0);
    BOOST_TEST(e.start_us >= 0);
    BOOST_TEST(e.start_us + e.duration_us <= p.window_us() + 1, e.name);
    if (e.category != "kernel") continue;
    BOOST_TEST_REQUIRE(e.launched_by != 0u, e.name << " has no launching host event");
    auto it = host.find(e.launched_by);
    BOOST_TEST_REQUIRE((it != host.end()), e.name << " names a host event that is not in the profile");
    BOOST_TEST(e.start_us >= it->second.start_us, e.name << " ran before " << it->second.name << " began");
    ++launchers[it->second.category];
    if (it->second.category == "op") ++launching_ops[it->second.name];
  }
  BOOST_TEST(kinds["kernel"] >= 5);  // exp, add, and a kernel per compiled call at least
  BOOST_TEST(kinds["memcpy"] >= 1);
  BOOST_TEST(launchers["op"] >= 3);
  BOOST_TEST(launching_ops["exp"] >= 1);
  BOOST_TEST(launching_ops["matmul"] >= 1);  // cuBLAS's kernels are linked too
  BOOST_TEST(launchers["region"] >= 3);

  std::string path = (std::filesystem::temp_directory_path() / ("kiln-cuda-trace-" + std::to_string(::getpid()) + ".json")).string();
  p.save_chrome_trace(path);
  boost::property_tree::ptree root;
  BOOST_REQUIRE_NO_THROW(boost::property_tree::read_json(path, root));
  std::filesystem::remove(path);
  std::map<std::string, int> phases;
  bool device_named = false;
  for (const auto& [key, e] : root.get_child("traceEvents")) {
    BOOST_TEST(!e.get<std::string>("name").empty());
    BOOST_TEST(e.get<double>("ts") >= 0);
    e.get<long>("pid");
    BOOST_TEST(e.get<int>("tid") >= 0);
    std::string ph = e.get<std::string>("ph");
    ++phases[ph];
    if (ph == "X") BOOST_TEST(e.get<double>("dur") >= 0);
    if (ph == "M" && e.get<std::string>("args.name") == "CUDA device 0") device_named = true;
  }
  BOOST_TEST(phases["X"] == int(ev.size()));
  BOOST_TEST(phases["s"] == linked);  // an arrow per launch, every kernel's among them
  BOOST_TEST(linked >= kinds["kernel"]);
  BOOST_TEST(phases["f"] == phases["s"]);
  BOOST_TEST(device_named);

  std::string table = p.table();
  BOOST_TEST(table.find("device ms") != std::string::npos, table);
  BOOST_TEST(table.find("kernel") != std::string::npos, table);
}

BOOST_AUTO_TEST_CASE(one_recording_at_a_time_and_a_profiler_after_another, *needs(cupti_unavailable_reason)) {
  {
    Profiler p({.cuda = true});
    check_error([] { CuptiActivity a(std::chrono::steady_clock::now()); }, {"CUDA activity", "one at a time"});
  }
  Tensor x = random_tensor({1024}, DType::f32, 4).to(kCuda);
  Profiler q({.cuda = true});
  Tensor y = x * 3.0;
  cuda_synchronize();
  q.stop();
  int kernels = 0;
  for (const ProfileEvent& e : q.events()) kernels += e.category == "kernel";
  BOOST_TEST(kernels >= 1);
}
