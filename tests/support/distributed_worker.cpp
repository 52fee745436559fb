// One rank of the distributed tests (tests/dsl/test_distributed.cpp starts two with
// distributed::launch). `distributed_worker MODE`: exits 0 when the rank's checks hold, else
// prints what failed and exits 1.
//   collectives   every collective and dtype against values computed in double
//   ddp-eager     an MLP trained with DistributedDataParallel, each rank on half of every batch,
//   ddp-compiled  the step eager or under kiln::compile (one graph, the all-reduces its nodes),
//                 against one process on the whole batches
//   no-sync       gradient accumulation under no_sync() against the whole batches
//   no-sync-compiled  the same with compiled micro-steps (no_sync() is guarded on)
//   mismatch      the ranks all_reduce different shapes: both get a kiln::Error naming both
//   dead-peer     rank 1 exits at once; rank 0's all_reduce must fail, not hang
//   timeout       rank 1 sleeps past KILN_DIST_TIMEOUT_S; rank 0's all_reduce must fail in time
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <thread>

#include "bench/zoo.h"
#include "kiln.h"
#include "support/distributed.h"

using namespace kiln;
namespace dist = kiln::distributed;

namespace {

int failures = 0;

void expect(bool ok, const std::string& what) {
  if (!ok) {
    std::printf("FAILED: %s\n", what.c_str());
    ++failures;
  }
}

// Element i of rank r's input: distinct across ranks and elements, exact in bf16.
double value(int r, int64_t i) { return double((r + 1) * 3 + (i % 7)) - 5.0; }

void check_collectives(int rank, int world) {
  for (DType t : {DType::f32, DType::f64, DType::i64, DType::i32, DType::bf16}) {
    for (dist::ReduceOp op : {dist::ReduceOp::sum, dist::ReduceOp::mean, dist::ReduceOp::max, dist::ReduceOp::min}) {
      if (!is_floating(t) && op == dist::ReduceOp::mean) continue;
      const int64_t n = 1000;
      Tensor x = empty({n}, {t});
      for (int64_t i = 0; i < n; ++i) store_from_double(x.data_ptr(), t, i, value(rank, i));
      dist::all_reduce(x, op);
      for (int64_t i = 0; i < n; ++i) {
        double want = op == dist::ReduceOp::max ? -1e300 : op == dist::ReduceOp::min ? 1e300 : 0;
        for (int r = 0; r < world; ++r) {
          double v = value(r, i);
          want = op == dist::ReduceOp::max ? std::max(want, v) : op == dist::ReduceOp::min ? std::min(want, v) : want + v;
        }
        if (op == dist::ReduceOp::mean) want /= world;
        double got = load_as_double(x.data_ptr(), t, i);
        if (std::abs(got - want) > 1e-2 * (1 + std::abs(want))) {
          expect(false, "all_reduce " + std::string(name(op)) + " of " + std::string(name(t)) + " element " +
                            std::to_string(i) + ": " + std::to_string(got) + " vs " + std::to_string(want));
          break;
        }
      }
    }
  }
  Tensor b = from_vector<float>({float(rank), float(rank + 10)}, {2});
  dist::broadcast(b, world - 1);
  expect(b.data<float>()[0] == float(world - 1) && b.data<float>()[1] == float(world + 9), "broadcast from the last rank");
  Tensor in = from_vector<float>({float(rank), float(-rank)}, {2});
  Tensor all = empty({2 * int64_t(world)});
  dist::all_gather(all, in);
  for (int r = 0; r < world; ++r)
    expect(all.data<float>()[2 * r] == float(r) && all.data<float>()[2 * r + 1] == float(-r), "all_gather rank order");
  Tensor whole = empty({3 * int64_t(world)});
  for (int64_t i = 0; i < whole.numel(); ++i) whole.data<float>()[i] = float(value(rank, i));
  Tensor part = empty({3});
  dist::reduce_scatter(part, whole, dist::ReduceOp::sum);
  for (int64_t i = 0; i < 3; ++i) {
    double want = 0;
    for (int r = 0; r < world; ++r) want += value(r, rank * 3 + i);
    expect(part.data<float>()[i] == float(want), "reduce_scatter part of rank " + std::to_string(rank));
  }
  dist::barrier();
}

// The largest relative difference between two lists of parameters.
double max_rel_diff(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  double worst = 0;
  for (size_t k = 0; k < a.size(); ++k) {
    const float* x = a[k].data<float>();
    const float* y = b[k].data<float>();
    for (int64_t i = 0; i < a[k].numel(); ++i) worst = std::max(worst, std::abs(double(x[i]) - y[i]) / (1e-3 + std::abs(y[i])));
  }
  return worst;
}

// Trains zoo::mlp for a few steps with DDP on this rank's half of each batch, and the same model
// on the whole batches in this process alone (the reference: rank 0's initial weights, which
// DDP broadcast); their parameters must agree.
// The loss: the mean square of the MLP's output (support/distributed.h).
using test::mean_square;
using test::mean_square_step;

void check_ddp(int rank, int world, bool compiled, bool accumulate) {
  const int steps = 4;
  manual_seed(1234);
  std::vector<Tensor> batches;
  for (int s = 0; s < steps; ++s) batches.push_back(randn({16, 64}));
  manual_seed(77);
  zoo::ZooModel reference = zoo::make_zoo_model("mlp", zoo::ZooSize::test);
  manual_seed(77 + uint64_t(rank));  // other weights on other ranks: DDP must broadcast rank 0's
  zoo::ZooModel mine = zoo::make_zoo_model("mlp", zoo::ZooSize::test);
  dist::DistributedDataParallel ddp(mine.module, {.bucket_mb = 0.004});  // a few buckets of a few KB
  expect(ddp.buckets().size() > 1, "the MLP's gradients span several buckets");
  optim::SGD opt(ddp.parameters(), {.lr = 0.05, .momentum = 0.9});
  optim::SGD ref_opt(reference.module->parameters(), {.lr = 0.05, .momentum = 0.9});

  auto step = [&](const Tensor& x) { return mean_square_step(ddp, opt, x); };
  auto compiled_step = compile([&](Tensor x) { return step(x); });
  // A micro-batch's forward and backward, compiled: under no_sync() its backward runs eagerly
  // without all-reducing; the next one's all-reduces the sum (the parameters hold gradients then,
  // so it runs eagerly too). tests/dsl/test_distributed.cpp checks the guard on no_sync().
  auto compiled_micro = compile([&](Tensor x) {
    Tensor loss = mean_square(ddp.forward(x)) * 0.5;
    loss.backward();
    return loss;
  });
  const int64_t half = 16 / world;
  for (int s = 0; s < steps; ++s) {
    Tensor x = batches[size_t(s)].narrow(0, rank * half, half).contiguous();
    if (accumulate) {  // two micro-batches: the first under no_sync, the second all-reduces the sum
      Tensor a = x.narrow(0, 0, half / 2).contiguous(), b = x.narrow(0, half / 2, half / 2).contiguous();
      auto micro = [&](const Tensor& part) {
        if (compiled) return compiled_micro(part);
        Tensor loss = mean_square(ddp.forward(part)) * 0.5;
        loss.backward();
        return loss;
      };
      {
        auto local = ddp.no_sync();
        micro(a);
      }
      micro(b);
      opt.step();
      opt.zero_grad();
    } else if (compiled) {
      compiled_step(x);
    } else {
      step(x);
    }
    Tensor ref_loss = mean_square(reference.module->forward(batches[size_t(s)]));
    ref_loss.backward();
    ref_opt.step();
    ref_opt.zero_grad();
  }
  // The ranks' parameters agree (bit for bit when both ranks chose the same GEMM kernels; a fresh
  // tuning cache measures the eager GEMM's choice in each process).
  std::vector<Tensor> flat_parts;
  for (const Tensor& p : ddp.parameters()) flat_parts.push_back(p.detach().reshape({-1}));
  Tensor flat = cat(flat_parts, 0).contiguous();
  Tensor gathered = empty({flat.numel() * world});
  dist::all_gather(gathered, flat);
  for (int r = 0; r < world; ++r) {
    std::vector<Tensor> theirs{gathered.narrow(0, r * flat.numel(), flat.numel())};
    double d = max_rel_diff(theirs, {flat});
    expect(d < 1e-5, "rank " + std::to_string(r) + "'s parameters equal rank " + std::to_string(rank) + "'s");
  }
  double diff = max_rel_diff(ddp.parameters(), reference.module->parameters());
  std::printf("rank %d: %s DDP after %d steps, largest relative difference to one process on whole batches %.2e "
              "(%lld all-reduces)\n", rank,
              accumulate ? (compiled ? "compiled no_sync" : "no_sync") : compiled ? "compiled" : "eager", steps, diff,
              static_cast<long long>(ddp.reductions()));
  expect(diff < 1e-4, "DDP parameters equal the single-process run's");
  expect(ddp.reductions() == int64_t(steps * ddp.buckets().size()), "one all-reduce per bucket per synced backward");
  if (compiled && !accumulate)  // forward, backward with the buckets' all-reduces, and SGD: one graph
    expect(compiled_step.stats().compiles == 1 && compiled_step.stats().recompiles == 0,
           "the compiled DDP step is one graph (compiles " + std::to_string(compiled_step.stats().compiles) + ")");

}

// Runs fn, which must throw kiln::Error containing `want` within `limit_s` seconds.
void expect_error(const std::function<void()>& fn, const std::string& want, double limit_s, const std::string& what) {
  auto t0 = std::chrono::steady_clock::now();
  try {
    fn();
    expect(false, what + ": no error");
  } catch (const Error& e) {
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("%s: kiln::Error after %.2f s: %s\n", what.c_str(), s, e.what());
    expect(std::string(e.what()).find(want) != std::string::npos, what + ": the message names '" + want + "'");
    expect(s < limit_s, what + ": within " + std::to_string(limit_s) + " s");
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  try {
    dist::init_process_group();
    int rank = dist::rank(), world = dist::world_size();
    if (mode == "collectives") {
      check_collectives(rank, world);
    } else if (mode == "ddp-eager" || mode == "ddp-compiled" || mode == "no-sync" || mode == "no-sync-compiled") {
      check_ddp(rank, world, mode == "ddp-compiled" || mode == "no-sync-compiled", mode.starts_with("no-sync"));
    } else if (mode == "mismatch") {
      expect_error([&] { dist::all_reduce(zeros({rank == 0 ? 4 : 5})); }, "f32[5]", 30, "mismatched all_reduce");
    } else if (mode == "dead-peer") {
      dist::barrier();          // both connected
      if (rank == 1) _exit(0);  // no goodbye: its sockets close
      // Once the peer is surely gone, a message larger than a socket buffer makes Gloo write to
      // the closed connection: the process must not die of SIGPIPE (exit status 141).
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      expect_error([&] { dist::all_reduce(zeros({1 << 20})); }, "rank 0", 30, "all_reduce with a dead peer");
      std::fflush(stdout);
      _exit(failures ? 1 : 0);  // the group's threads still wait on the dead peer's sockets
    } else if (mode == "timeout") {
      if (rank == 1) {
        std::this_thread::sleep_for(std::chrono::seconds(8));
        _exit(0);
      }
      expect_error([&] { dist::all_reduce(zeros({1000})); }, "KILN_DIST_TIMEOUT_S", 7, "all_reduce past the timeout");
      std::fflush(stdout);
      _exit(failures ? 1 : 0);
    } else {
      std::printf("distributed_worker: unknown mode '%s'\n", mode.c_str());
      return 2;
    }
    dist::destroy_process_group();
  } catch (const std::exception& e) {
    std::printf("FAILED: %s\n", e.what());
    return 1;
  }
  return failures ? 1 : 0;
}
