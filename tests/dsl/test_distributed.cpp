// Collectives, DistributedDataParallel and the launcher (dsl/distributed/): two ranks started by
// distributed::launch run tests/support/distributed_worker.cpp, which checks each rank's results
// against values computed in double or against one process training on the whole batches.
#include <boost/test/unit_test.hpp>
#include <cstdlib>

#include "kiln.h"

using namespace kiln;
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
