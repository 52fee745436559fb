// Collectives on CUDA tensors through NCCL and DistributedDataParallel on CUDA, in a world of one
// process (one GPU: NCCL takes one rank per device). The collectives' results across ranks are
// checked on the CPU with Gloo (tests/dsl/test_distributed.cpp); here the NCCL path runs on the
// group's communication stream, ordered with kiln's by events: each collective of one rank gives
// its input back (a mean of one) and is seen by the kernels queued after it, a CPU collective
// interleaves with CUDA ones, and a DDP model trains as the same model without DDP, eagerly and
// in compiled steps whose backward holds the buckets' all-reduces.
#include <chrono>
#include <thread>

#include "cuda/cuda_available.h"
#include "support/reference.h"
#include "support/distributed.h"

using namespace kiln;
using namespace kiln::test;
namespace dist = kiln::distributed;

namespace {

boost::unit_test::precondition needs_nccl() {
  return needs([] {
    if (!cuda_unavailable_reason().empty()) return "no CUDA device (" + cuda_unavailable_reason() + ")";
    return nccl_available() ? std::string() : "no NCCL (" + nccl_unavailable_reason() + ")";
  });
}

void expect_equal(const Tensor& got, const Tensor& want, const std::string& what) {
  std::vector<double> g = host_values(got.to(Device::cpu())), w = host_values(want.to(Device::cpu()));
  BOOST_TEST_CONTEXT(what) {
    BOOST_TEST(g.size() == w.size());
    for (size_t i = 0; i < g.size() && i < w.size(); ++i)
      if (g[i] != w[i]) {
        BOOST_TEST(g[i] == w[i], "element " << i);
        break;
      }
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(nccl_collectives_on_one_rank_give_their_input_back, *needs_nccl()) {
  WorldOfOne world;
  for (DType t : {DType::f32, DType::bf16, DType::f64, DType::i64}) {
    Tensor x = (randn({1000}) * 10).to(t).to(kCuda);
    Tensor before = x.clone();
    for (dist::ReduceOp op : {dist::ReduceOp::sum, dist::ReduceOp::max})
      dist::all_reduce(x, op);
    if (is_floating(t)) dist::all_reduce(x, dist::ReduceOp::mean);
    expect_equal(x, before, std::string("all_reduce of ") + std::string(name(t)));
    dist::broadcast(x, 0);
    expect_equal(x, before, "broadcast");
    Tensor gathered = empty({1000}, {t, kCuda});
    dist::all_gather(gathered, x);
    expect_equal(gathered, before, "all_gather");
    Tensor part = empty({1000}, {t, kCuda});
    dist::reduce_scatter(part, x);
    expect_equal(part, before, "reduce_scatter");
  }
  Tensor cpu = from_vector<float>({1, 2, 3});
  dist::all_reduce(cpu);  // Gloo's path, between NCCL calls
  dist::all_reduce(randn({4}).to(kCuda));
  BOOST_TEST(cpu.to_vector<float>()[2] == 3.0f);
}

BOOST_AUTO_TEST_CASE(ddp_on_cuda_trains_as_the_plain_model, *needs_nccl()) {
  WorldOfOne world;
  auto make = [] {
    manual_seed(5);
    auto m = std::make_shared<nn::MLP>(std::vector<int64_t>{32, 64, 8});
    m->to(kCuda);
    return m;
  };
  auto plain = make();
  dist::DistributedDataParallel ddp(make(), {.bucket_mb = 0.001});  // two buckets
  BOOST_TEST(ddp.buckets().size() > 1u);
  optim::AdamW plain_opt(plain->parameters(), {.lr = 1e-2}), ddp_opt(ddp.parameters(), {.lr = 1e-2});
  auto compiled = compile([&](const Tensor& x) { return mean_square_step(ddp, ddp_opt, x); }, {.name = "ddp step"});
  auto compiled_halide = compile([&](const Tensor& x) { return mean_square_step(ddp, ddp_opt, x); },
                                 {.backend = "halide", .name = "ddp step halide"});
  for (int i = 0; i < 6; ++i) {
    Tensor x = randn({16, 32}).to(kCuda);
    mean_square_step(*plain, plain_opt, x);
    if (i % 3 == 1) compiled(x);
    else if (i % 3 == 2) compiled_halide(x);
    else mean_square_step(ddp, ddp_opt, x);
  }
  BOOST_TEST(ddp.reductions() == int64_t(6 * ddp.buckets().size()));
  BOOST_TEST(compiled.stats().compiles == 1);  // one graph: the all-reduces are its nodes
  BOOST_TEST(compiled_halide.stats().compiles == 1);
  auto a = plain->parameters(), b = ddp.parameters();
  for (size_t k = 0; k < a.size(); ++k) check_close(b[k], host_values(a[k].to(Device::cpu())), a[k].shape(), "parameter " + std::to_string(k));
}

// The watchdog: a collective not done on the device within the group's timeout aborts the
// communicator, and the group's next collective is a kiln::Error. The all-reduce waits on the
// device behind a queue of large matmuls (seconds of work) while the timeout is one second.
BOOST_AUTO_TEST_CASE(a_collective_stuck_past_the_timeout_aborts_the_communicator, *needs_nccl()) {
  WorldOfOne world(std::chrono::milliseconds(1000));
  Tensor x = randn({1000}).to(kCuda);
  dist::all_reduce(x);  // the communicator exists, and works
  Tensor a = randn({8192, 8192}).to(kCuda), b = randn({8192, 8192}).to(kCuda);
  const Float32MatmulPrecision saved = float32_matmul_precision();
  set_float32_matmul_precision(Float32MatmulPrecision::highest);  // no TF32: about 20 ms a product
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 400; ++i) a = matmul(a, b) * 1e-4;  // seconds of work queued on kiln's stream
  dist::all_reduce(x);  // queued behind them on the communication stream
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  try {
    dist::all_reduce(x);
    BOOST_FAIL("a collective on an aborted communicator did not throw");
  } catch (const Error& e) {
    BOOST_TEST_MESSAGE(e.what());
    BOOST_TEST(std::string(e.what()).find("aborted") != std::string::npos);
    BOOST_TEST(std::string(e.what()).find("KILN_DIST_TIMEOUT_S") != std::string::npos);
  }
  cuda_synchronize(0);  // the products finish; nothing waits on the aborted collective forever
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  BOOST_TEST_MESSAGE("the queued products took " << s << " s");
  BOOST_TEST(s > 2.5);  // they were still running when the watchdog looked
  set_float32_matmul_precision(saved);
}
