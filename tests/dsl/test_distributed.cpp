// Collectives, DistributedDataParallel and the launcher (dsl/distributed/): two ranks started by
// distributed::launch run tests/support/distributed_worker.cpp, which checks each rank's results
// against values computed in double or against one process training on the whole batches.
#include <boost/test/unit_test.hpp>
#include <cstdlib>

#include "kiln.h"
#include "support/distributed.h"

using namespace kiln;
using kiln::test::mean_square_step;
using kiln::test::sum_backward;
using kiln::test::WorldOfOne;
namespace dist = kiln::distributed;

namespace {

int run_workers(const std::string& mode, int nproc = 2) {
  BOOST_TEST_MESSAGE("distributed_worker " << mode << " on " << nproc << " ranks");
  return dist::launch({KILN_DISTRIBUTED_WORKER, mode}, {.nproc = nproc});
}

}  // namespace

BOOST_AUTO_TEST_SUITE(distributed)

BOOST_AUTO_TEST_CASE(collectives_match_double_references) { BOOST_TEST(run_workers("collectives") == 0); }

BOOST_AUTO_TEST_CASE(collectives_on_three_ranks) { BOOST_TEST(run_workers("collectives", 3) == 0); }

BOOST_AUTO_TEST_CASE(ddp_eager_matches_one_process_on_whole_batches) { BOOST_TEST(run_workers("ddp-eager") == 0); }

BOOST_AUTO_TEST_CASE(ddp_compiled_step_matches_one_process) { BOOST_TEST(run_workers("ddp-compiled") == 0); }

BOOST_AUTO_TEST_CASE(ddp_no_sync_accumulates_then_reduces) { BOOST_TEST(run_workers("no-sync") == 0); }

BOOST_AUTO_TEST_CASE(ddp_no_sync_with_compiled_micro_steps) { BOOST_TEST(run_workers("no-sync-compiled") == 0); }

BOOST_AUTO_TEST_CASE(mismatched_shapes_are_an_error_on_both_ranks) { BOOST_TEST(run_workers("mismatch") == 0); }

BOOST_AUTO_TEST_CASE(a_dead_peer_is_an_error_not_a_hang) { BOOST_TEST(run_workers("dead-peer") == 0); }

BOOST_AUTO_TEST_CASE(a_late_peer_times_out) {
  ::setenv("KILN_DIST_TIMEOUT_S", "3", 1);
  int rc = run_workers("timeout");
  ::unsetenv("KILN_DIST_TIMEOUT_S");
  BOOST_TEST(rc == 0);
}

BOOST_AUTO_TEST_CASE(a_failing_rank_stops_the_others) {
  // `sh -c`: rank 1 fails at once, rank 0 would sleep a minute; launch stops it and reports 3.
  auto t0 = std::chrono::steady_clock::now();
  int rc = dist::launch({"sh", "-c", "if [ \"$RANK\" = 1 ]; then exit 3; fi; sleep 60"}, {.nproc = 2});
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  BOOST_TEST(rc == 3);
  BOOST_TEST(s < 20);
}

BOOST_AUTO_TEST_CASE(unset_rendezvous_variables_are_an_error) {
  for (const char* v : {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"}) ::unsetenv(v);
  try {
    dist::init_process_group();
    BOOST_FAIL("init_process_group without RANK and WORLD_SIZE did not throw");
  } catch (const Error& e) {
    BOOST_TEST_MESSAGE(e.what());
    BOOST_TEST(std::string(e.what()).find("WORLD_SIZE is not set") != std::string::npos);
    BOOST_TEST(std::string(e.what()).find("kiln run") != std::string::npos);
  }
  BOOST_TEST(!dist::is_initialized());
}

BOOST_AUTO_TEST_CASE(a_world_of_one_needs_no_peers) {
  dist::InitOptions o;
  o.rank = 0, o.world_size = 1, o.master_port = dist::free_port();
  dist::init_process_group(o);
  Tensor x = from_vector<float>({1.5f, -2.0f}, {2});
  dist::all_reduce(x, dist::ReduceOp::mean);
  BOOST_TEST(x.data<float>()[0] == 1.5f);
  BOOST_TEST(x.data<float>()[1] == -2.0f);
  try {
    dist::all_reduce(x.t().contiguous().reshape({1, 2}).expand({2, 2}));
    BOOST_FAIL("all_reduce of a non-contiguous tensor did not throw");
  } catch (const Error& e) {
    BOOST_TEST(std::string(e.what()).find("not contiguous") != std::string::npos);
  }
  dist::destroy_process_group();
}

BOOST_AUTO_TEST_SUITE_END()

// The functional all-reduce ops and DDP's compiled backward, in this process as a world of one.
BOOST_AUTO_TEST_SUITE(distributed_in_one_process)

namespace {

int count_of(const std::string& text, const std::string& word) {
  int n = 0;
  for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) ++n;
  return n;
}

double max_abs_diff(const Tensor& a, const Tensor& b) { return max(abs(a - b)).item<double>(); }

}  // namespace

BOOST_AUTO_TEST_CASE(all_reduce_start_and_wait_cut_the_result_into_shapes) {
  WorldOfOne world;
  manual_seed(11);
  Tensor x = randn({10});
  const int64_t tag = 987;
  int64_t before = dist::all_reduces_started(tag);
  Tensor started = dist::all_reduce_start(x, dist::ReduceOp::mean, dist::default_group(), {.checked = true, .tag = tag});
  BOOST_TEST(started.data_ptr() != x.data_ptr());
  TensorList parts = dist::all_reduce_wait(started, {{2, 3}, {4}});
  BOOST_TEST(dist::all_reduces_started(tag) == before + 1);
  BOOST_TEST((parts[0].shape() == Shape{2, 3}));
  BOOST_TEST((parts[1].shape() == Shape{4}));
  BOOST_TEST(max_abs_diff(parts[0].reshape({6}), x.narrow(0, 0, 6)) == 0.0);
  BOOST_TEST(max_abs_diff(parts[1], x.narrow(0, 6, 4)) == 0.0);
  try {
    dist::all_reduce_wait(started, {{10}});  // waited for already
    BOOST_FAIL("a second wait did not throw");
  } catch (const Error& e) {
    BOOST_TEST(std::string(e.what()).find("not an all-reduce in flight") != std::string::npos);
  }
  try {
    dist::all_reduce_wait(dist::all_reduce_start(x, dist::ReduceOp::sum, dist::default_group()), {{3, 3}});
    BOOST_FAIL("shapes of 9 elements for a tensor of 10 did not throw");
  } catch (const Error& e) {
    BOOST_TEST(std::string(e.what()).find("hold 9 elements") != std::string::npos);
  }
}

// A started all-reduce dropped without its wait (a step that threw in between) is waited for and
// let go by the next start, so its buffer does not stay forever.
BOOST_AUTO_TEST_CASE(an_abandoned_all_reduce_is_let_go_by_the_next_start) {
  WorldOfOne world;
  manual_seed(13);
  Tensor x = randn({1000});
  // (A start lets go of every abandoned one: of earlier tests' too.)
  { Tensor dropped = dist::all_reduce_start(x, dist::ReduceOp::sum, dist::default_group()); }
  BOOST_TEST(dist::all_reduces_in_flight() == 1);
  Tensor started = dist::all_reduce_start(x, dist::ReduceOp::sum, dist::default_group());
  BOOST_TEST(dist::all_reduces_in_flight() == 1);
  Tensor view = started.reshape({10, 100});  // a view keeps the entry: it can still be waited for
  started = Tensor();
  Tensor other = dist::all_reduce_start(x, dist::ReduceOp::sum, dist::default_group());
  BOOST_TEST(dist::all_reduces_in_flight() == 2);
  BOOST_TEST(max_abs_diff(dist::all_reduce_wait(view, {{1000}})[0], x) == 0.0);
  BOOST_TEST(max_abs_diff(dist::all_reduce_wait(other, {{1000}})[0], x) == 0.0);
  BOOST_TEST(dist::all_reduces_in_flight() == 0);
}

BOOST_AUTO_TEST_CASE(compiled_graphs_keep_every_collective) {
  WorldOfOne world;
  auto f = compile([](Tensor x) {
    dist::ProcessGroup& g = dist::default_group();
    Tensor a = dist::all_reduce_wait(dist::all_reduce_start(x * 2, dist::ReduceOp::sum, g), {x.shape()})[0];
    Tensor b = dist::all_reduce_wait(dist::all_reduce_start(x * 2, dist::ReduceOp::sum, g), {x.shape()})[0];
    return a + b;  // the same all-reduce twice: both run (every rank issues both)
  });
  manual_seed(12);
  Tensor x = randn({4, 5});
  BOOST_TEST(max_abs_diff(f(x), x * 4) < 1e-6);
  ExplainReport r = explain(f, x);
  BOOST_TEST(r.breaks.empty());
  std::string graphs;
  for (const std::string& g : r.graphs) graphs += g;
  BOOST_TEST(count_of(graphs, "distributed::all_reduce_start") == 2, graphs);
  BOOST_TEST(count_of(graphs, "distributed::all_reduce_wait") == 2, graphs);
}

// A DDP training step compiled in a world of one: one graph, each bucket's all-reduce a node of
// it, the parameters as a plain training step leaves them.
BOOST_AUTO_TEST_CASE(ddp_compiled_step_is_one_graph_with_the_buckets_all_reduces) {
  WorldOfOne world;
  manual_seed(5);
  auto ddp_model = std::make_shared<nn::MLP>(std::vector<int64_t>{32, 64, 64, 8});
  manual_seed(5);
  auto plain = std::make_shared<nn::MLP>(std::vector<int64_t>{32, 64, 64, 8});
  dist::DistributedDataParallel ddp(ddp_model, {.bucket_mb = 0.01});
  const int buckets = int(ddp.buckets().size());
  BOOST_TEST(buckets > 1);
  optim::AdamW opt(ddp.parameters(), {.lr = 1e-2});
  optim::AdamW plain_opt(plain->parameters(), {.lr = 1e-2});
  auto step = compile([&](Tensor x) { return mean_square_step(ddp, opt, x); });
  for (int s = 0; s < 3; ++s) {
    Tensor x = randn({16, 32});
    step(x);
    mean_square_step(*plain, plain_opt, x);
  }
  auto ps = ddp.parameters(), qs = plain->parameters();
  for (size_t i = 0; i < ps.size(); ++i) BOOST_TEST(max_abs_diff(ps[i], qs[i]) < 1e-5);
  BOOST_TEST(step.stats().compiles == 1);
  BOOST_TEST(ddp.reductions() == 3 * buckets);
  ExplainReport r = explain(step, randn({16, 32}));
  BOOST_TEST(r.breaks.empty());
  std::string graphs;
  for (const std::string& g : r.graphs) graphs += g;
  BOOST_TEST(count_of(graphs, "distributed::all_reduce_start") == buckets);
  // Under no_sync() the backward is not traced over the hooks: a new trace, with a break.
  {
    auto local = ddp.no_sync();
    step(randn({16, 32}));
  }
  BOOST_TEST(step.stats().recompiles == 1);
  BOOST_TEST(step.stats().recompile_reasons.at(0).find("grad-ready hooks: traced -> eager") != std::string::npos,
             step.stats().recompile_reasons.at(0));
}

// A parameter the forward does not use still takes part (with zeros), as in the eager DDP: its
// grad() after a compiled backward equals the eager one's (zeros in a world of one).
namespace {
struct HalfUsed : nn::Module {
  HalfUsed() {
    used = register_module("used", std::make_shared<nn::Linear>(8, 4));
    unused = register_module("unused", std::make_shared<nn::Linear>(8, 4));
  }
  Tensor forward(const Tensor& x) override { return used->forward(x); }
  std::shared_ptr<nn::Linear> used, unused;
};
}  // namespace

BOOST_AUTO_TEST_CASE(ddp_compiled_backward_gives_unused_parameters_zeros) {
  WorldOfOne world;
  manual_seed(21);
  auto eager_model = std::make_shared<HalfUsed>();
  manual_seed(21);
  auto compiled_model = std::make_shared<HalfUsed>();
  dist::DistributedDataParallel eager_ddp(eager_model), compiled_ddp(compiled_model);
  auto compiled = compile([&](Tensor x) { return sum_backward(compiled_ddp, x); });
  Tensor x = randn({5, 8});
  sum_backward(eager_ddp, x);
  compiled(x);
  BOOST_TEST(compiled.stats().compiles == 1);
  auto want = eager_ddp.parameters(), got = compiled_ddp.parameters();
  for (size_t i = 0; i < want.size(); ++i) {
    BOOST_TEST_CONTEXT("parameter " << i) {
      BOOST_REQUIRE(got[i].grad().defined());
      BOOST_TEST(max_abs_diff(got[i].grad(), want[i].grad()) < 1e-6);
    }
  }
  BOOST_TEST(max_abs_diff(compiled_model->unused->weight.grad(), zeros({4, 8})) == 0.0);
}

// A frozen parameter (requires_grad off, as in fine-tuning) is broadcast and left out of the
// buckets; the trained ones reduce as usual, eagerly and compiled.
BOOST_AUTO_TEST_CASE(ddp_leaves_frozen_parameters_out_of_the_buckets) {
  WorldOfOne world;
  manual_seed(22);
  auto model = std::make_shared<nn::MLP>(std::vector<int64_t>{8, 16, 4});
  std::vector<Tensor> ps = model->parameters();
  ps[0].requires_grad_(false);  // the first layer's weight
  dist::DistributedDataParallel ddp(model, {.bucket_mb = 0.0001});  // buckets of about 100 bytes
  size_t bucketed = 0;
  for (const auto& b : ddp.buckets()) bucketed += b.size();
  BOOST_TEST(bucketed == ps.size() - 1);
  auto compiled = compile([&](Tensor x) { return sum_backward(ddp, x); });
  Tensor x = randn({3, 8});
  sum_backward(ddp, x);
  std::vector<Tensor> eager_grads;
  for (size_t i = 1; i < ps.size(); ++i) eager_grads.push_back(ps[i].grad().clone());
  for (const Tensor& p : ps) p.set_grad(Tensor());
  compiled(x);
  BOOST_TEST(compiled.stats().compiles == 1);
  BOOST_TEST(!ps[0].grad().defined());
  for (size_t i = 1; i < ps.size(); ++i) BOOST_TEST(max_abs_diff(ps[i].grad(), eager_grads[i - 1]) < 1e-6);
  BOOST_TEST(ddp.reductions() == 2 * int64_t(ddp.buckets().size()));
}

// A module shared by two parents lists its parameters twice: DDP reduces each once, and the
// compiled backward gives them the plain model's gradients.
namespace {
struct TwiceUsed : nn::Module {
  TwiceUsed() {
    lin = register_module("a", std::make_shared<nn::Linear>(6, 6));
    register_module("b", lin);
  }
  Tensor forward(const Tensor& x) override { return lin->forward(lin->forward(x)); }
  std::shared_ptr<nn::Linear> lin;
};
}  // namespace

BOOST_AUTO_TEST_CASE(ddp_reduces_a_shared_parameter_once) {
  WorldOfOne world;
  manual_seed(23);
  auto plain = std::make_shared<TwiceUsed>();
  manual_seed(23);
  auto model = std::make_shared<TwiceUsed>();
  BOOST_TEST(model->named_parameters().size() == 4u);
  dist::DistributedDataParallel ddp(model);
  size_t bucketed = 0;
  for (const auto& b : ddp.buckets()) bucketed += b.size();
  BOOST_TEST(bucketed == 2u);
  Tensor x = randn({3, 6});
  sum_backward(*plain, x);
  auto compiled = compile([&](Tensor v) { return sum_backward(ddp, v); });
  compiled(x);
  BOOST_TEST(compiled.stats().compiles == 1);
  BOOST_TEST(max_abs_diff(model->lin->weight.grad(), plain->lin->weight.grad()) < 1e-5);
  BOOST_TEST(max_abs_diff(model->lin->bias.grad(), plain->lin->bias.grad()) < 1e-5);
}

// A hook of the user's own on a DDP parameter still runs in a compiled step: the traced form
// stands in for DDP's hook only, so the backward runs on the tape.
BOOST_AUTO_TEST_CASE(a_users_grad_hook_beside_ddp_runs_in_a_compiled_step) {
  WorldOfOne world;
  manual_seed(24);
  auto model = std::make_shared<nn::MLP>(std::vector<int64_t>{4, 8, 2});
  int calls = 0;
  model->parameters()[0].on_grad_ready([&](const Tensor&) { ++calls; });
  dist::DistributedDataParallel ddp(model);
  auto compiled = compile([&](Tensor v) { return sum_backward(ddp, v); });
  compiled(randn({3, 4}));
  BOOST_TEST(calls == 1);
  BOOST_TEST(ddp.reductions() == int64_t(ddp.buckets().size()));
}

// Destroying the wrapper removes its hooks: the plain module's compiled backward is one graph
// again, and a second wrapper's buckets are traced, with no stale hook of the first left over.
BOOST_AUTO_TEST_CASE(a_module_outliving_its_ddp_wrapper_keeps_no_hooks) {
  WorldOfOne world;
  manual_seed(25);
  auto model = std::make_shared<nn::MLP>(std::vector<int64_t>{4, 8, 2});
  { dist::DistributedDataParallel first(model); }
  for (const Tensor& p : model->parameters()) BOOST_TEST(!p.has_grad_ready_hooks());
  auto plain = compile([&](Tensor v) { return sum_backward(*model, v); });
  ExplainReport r = explain(plain, randn({3, 4}));
  BOOST_TEST(r.breaks.empty());
  for (const Tensor& p : model->parameters()) p.set_grad(Tensor());  // a traced DDP backward starts from none
  dist::DistributedDataParallel second(model);
  auto wrapped = compile([&](Tensor v) { return sum_backward(second, v); });
  ExplainReport w = explain(wrapped, randn({3, 4}));
  BOOST_TEST(w.breaks.empty());
  std::string graphs;
  for (const std::string& g : w.graphs) graphs += g;
  BOOST_TEST(count_of(graphs, "distributed::all_reduce_start") == int(second.buckets().size()), graphs);
}

// A user's hook removed through its handle no longer runs, and DDP's traced form stands in again.
BOOST_AUTO_TEST_CASE(a_removed_users_hook_no_longer_breaks_the_trace) {
  WorldOfOne world;
  manual_seed(26);
  auto model = std::make_shared<nn::MLP>(std::vector<int64_t>{4, 8, 2});
  int calls = 0;
  GradHookHandle mine = model->parameters()[0].on_grad_ready([&](const Tensor&) { ++calls; });
  dist::DistributedDataParallel ddp(model);
  mine.remove();
  mine.remove();  // harmless twice
  auto compiled = compile([&](Tensor v) { return sum_backward(ddp, v); });
  ExplainReport r = explain(compiled, randn({3, 4}));  // runs it once
  BOOST_TEST(r.breaks.empty());
  BOOST_TEST(calls == 0);
  BOOST_TEST(ddp.reductions() == int64_t(ddp.buckets().size()));
}

BOOST_AUTO_TEST_SUITE_END()
