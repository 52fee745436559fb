#include "dsl/distributed/process_group.h"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>
#include <condition_variable>
#include <csignal>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "dsl/cuda/cuda_context.h"
#include "dsl/cuda/nccl_api.h"
#include "dsl/distributed/collective_description.h"
#include "dsl/distributed/functional.h"
#include "dsl/distributed/host_reduce.h"
#include "dsl/distributed/nccl_stream.h"
#include "dsl/distributed/store.h"
#include "dsl/error.h"
#include "dsl/settings.h"
#include "dsl/storage.h"

namespace kiln::distributed {

std::string_view name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::mean: return "mean";
    case ReduceOp::max: return "max";
    case ReduceOp::min: return "min";
  }
  return "?";
}

void Work::wait() const {
  if (done_.valid()) done_.get();
  if (then_) (*then_)();
}

bool Work::completed() const {
  return !done_.valid() || done_.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

namespace {

// Gloo's rendezvous through kiln's store.
class GlooStore : public gloo::rendezvous::Store {
 public:
  explicit GlooStore(distributed::Store& store) : store_(store) {}
  void set(const std::string& key, const std::vector<char>& data) override { store_.set(key, data); }
  std::vector<char> get(const std::string& key) override { return store_.get(key); }
  void wait(const std::vector<std::string>& keys) override {
    for (const std::string& k : keys) store_.get(k);
  }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds&) override { wait(keys); }

 private:
  distributed::Store& store_;
};

void written(const Tensor& t) { t.impl().storage->written(); }

}  // namespace

struct ProcessGroup::State {
  int64_t id = 0;
  int rank = 0, size = 1;
  std::chrono::milliseconds timeout{0};
  std::unique_ptr<distributed::Store> store;
  std::shared_ptr<gloo::rendezvous::Context> gloo;
  uint32_t tag = 0;
  // NCCL for CUDA tensors: one communicator on one device (owned by its watchdog) and its
  // stream, made by the first CUDA collective.
  std::unique_ptr<NcclWatchdog> watchdog;
  int nccl_device = -1;
  CUstream comm_stream = nullptr;
  std::shared_ptr<CudaOrder> order;  // the running CUDA collective's (set by submit)

  ncclComm_t nccl_comm(const Tensor& t, std::string_view op) {
    int device = t.device().index;
    if (watchdog) {
      KILN_CHECK(device == nccl_device, op, ": rank ", rank, "'s CUDA collectives run on cuda:", nccl_device,
                 " (its first one's device); this tensor is on ", t.device().str());
      return watchdog->comm();
    }
    const NcclApi& api = nccl_api();
    ncclUniqueId id{};
    if (rank == 0) {
      check_nccl(api.ncclGetUniqueId(&id), "nccl: ncclGetUniqueId");
      store->set("nccl/id", std::vector<char>(id.internal, id.internal + sizeof id.internal));
    } else {
      std::vector<char> v = store->get("nccl/id");
      KILN_CHECK(v.size() == sizeof id.internal, "nccl: rank 0 published a unique id of ", v.size(), " bytes");
      std::memcpy(id.internal, v.data(), v.size());
    }
    cuda_context(device);  // kiln's context current on this thread: NCCL works on its device
    const std::string who = "rank " + std::to_string(rank) + " of " + std::to_string(size);
    ncclComm_t comm = nullptr;
    check_nccl(api.ncclCommInitRank(&comm, size, id, rank), "nccl: ncclCommInitRank (" + who + ")");
    watchdog = std::make_unique<NcclWatchdog>(comm, timeout, who);
    nccl_device = device;
    check_cuda(cuda_api().cuStreamCreate(&comm_stream, 0x1 /* CU_STREAM_NON_BLOCKING */),
               "nccl: creating the communication stream");
    return comm;
  }

  static int nccl_type(const Tensor& t, std::string_view op) {
    switch (t.dtype()) {
      case DType::f32: return nccl::kFloat32;
      case DType::f64: return nccl::kFloat64;
      case DType::f16: return nccl::kFloat16;
      case DType::bf16: return nccl::kBfloat16;
      case DType::i32: return nccl::kInt32;
      case DType::i64: return nccl::kInt64;
      default: throw_error(op, ": dtype ", t.dtype(), " has no NCCL type (f32, f64, f16, bf16, i32, i64)");
    }
  }

  static int nccl_op(ReduceOp op) {
    switch (op) {
      case ReduceOp::sum: return nccl::kSum;
      case ReduceOp::mean: return nccl::kAvg;
      case ReduceOp::max: return nccl::kMax;
      case ReduceOp::min: return nccl::kMin;
    }
    return nccl::kSum;
  }

  // A NCCL call on the communication stream, ordered with kiln's stream by the running
  // collective's CudaOrder (the host does not wait).
  template <typename F>
  void nccl_call(const Tensor& t, std::string_view op, F&& f) {
    ncclComm_t comm = nccl_comm(t, op);
    cuda_context(t.device().index);  // current on this thread
    KILN_CHECK(order, op, ": a CUDA collective issued without its stream order");
    watchdog->issue(op, order, [&] {
      order->before(comm_stream);
      ncclResult_t r = f(comm, comm_stream);
      order->after(comm_stream);  // also after a failed call: whatever it queued is waited for
      check_nccl(r, std::string(op) + " on rank " + std::to_string(rank) + " (NCCL)", comm);
    });
  }

  ~State() {
    watchdog.reset();
    if (comm_stream) cuda_api().cuStreamDestroy(comm_stream);
  }

  // The communication thread: collectives in the order they were issued.
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::packaged_task<void()>> queue;
  bool stopping = false;
  std::thread thread;

  void loop() {
    for (;;) {
      std::packaged_task<void()> task;
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return stopping || !queue.empty(); });
        if (queue.empty()) return;
        task = std::move(queue.front());
        queue.pop_front();
      }
      task();
    }
  }

  // Queues fn on the communication thread; a CUDA collective's fn runs with `order` set.
  Work submit(std::function<void()> fn, std::shared_ptr<CudaOrder> cuda = nullptr) {
    std::packaged_task<void()> task([this, fn = std::move(fn), cuda] {
      order = cuda;
      struct Reset {
        std::shared_ptr<CudaOrder>& o;
        ~Reset() { o.reset(); }
      } reset{order};
      fn();
    });
    Work w(task.get_future().share(), cuda ? std::function<void()>([cuda] { cuda->join(); }) : std::function<void()>());
    {
      std::lock_guard<std::mutex> lock(mu);
      queue.push_back(std::move(task));
    }
    cv.notify_one();
    return w;
  }

  // Runs a Gloo call, turning its failures into kiln::Error naming the collective.
  template <typename F>
  void gloo_call(const std::string& what, F&& f) {
    try {
      f();
    } catch (const gloo::Exception& e) {
      std::string m = e.what();
      bool timed_out = m.find("imeout") != std::string::npos || m.find("imed out") != std::string::npos;
      if (timed_out)
        throw_error(what, " on rank ", rank, " of ", size, ": another rank did not arrive within KILN_DIST_TIMEOUT_S (",
                    timeout.count() / 1000.0, " s) [gloo: ", m, "]");
      throw_error(what, " on rank ", rank, " of ", size, ": a peer failed (a rank exited or its connection broke) [gloo: ",
                  m, "]");
    }
  }

  // Checks that every rank issued the same collective on the same dtype and shape.
  void check(Collective c, const Tensor* t, int64_t argument) {
    std::vector<int64_t> mine = describe(c, t, argument);
    if (size == 1) return;
    std::vector<int64_t> all(kDescription * size_t(size));
    gloo_call(std::string(name(c)), [&] {
      gloo::AllgatherOptions o(gloo);
      o.setInput(mine.data(), mine.size());
      o.setOutput(all.data(), all.size());
      o.setTag(tag++);
      gloo::allgather(o);
    });
    for (int r = 0; r < size; ++r) {
      const int64_t* theirs = all.data() + kDescription * size_t(r);
      if (!std::equal(mine.begin(), mine.end(), theirs))
        throw_error(name(c), ": ranks disagree: rank ", rank, " called ", describe_text(mine.data()), " but rank ", r,
                    " called ", describe_text(theirs), " (every rank must issue the same collectives, in the same "
                    "order, on tensors of the same dtype and shape)");
    }
  }

  void all_reduce(const Tensor& t, ReduceOp op, bool checked = true) {
    if (checked) check(Collective::all_reduce, &t, int64_t(op));
    if (!t.device().is_cpu()) {
      if (t.numel() > 0)
        nccl_call(t, "all_reduce", [&](ncclComm_t comm, CUstream stream) {
          return nccl_api().ncclAllReduce(t.data_ptr(), t.data_ptr(), size_t(t.numel()), nccl_type(t, "all_reduce"),
                                          nccl_op(op), comm, stream);
        });
      written(t);
      return;
    }
    if (size > 1 && t.numel() > 0) {
      gloo_call("all_reduce", [&] {
        gloo::AllreduceOptions o(gloo);
        o.setTag(tag++);
        void* p = t.data_ptr();
        size_t n = size_t(t.numel());
        ReduceOp r = op == ReduceOp::mean ? ReduceOp::sum : op;
        HostReduce reduce = host_reduce(t.dtype(), "all_reduce");
        o.setReduceFunction([r, reduce](void* c, const void* a, const void* b, size_t k) { reduce(r, c, a, b, k); });
        switch (itemsize(t.dtype())) {  // Gloo's buffer: elements of the dtype's size
          case 8: o.setOutput(static_cast<int64_t*>(p), n); break;
          case 4: o.setOutput(static_cast<int32_t*>(p), n); break;
          default: o.setOutput(static_cast<uint16_t*>(p), n); break;
        }
        gloo::allreduce(o);
      });
    }
    if (op == ReduceOp::mean && size > 1) divide(t, size);
    written(t);
  }

  void broadcast(const Tensor& t, int src) {
    check(Collective::broadcast, &t, src);
    if (!t.device().is_cpu()) {
      if (t.numel() > 0)
        nccl_call(t, "broadcast", [&](ncclComm_t comm, CUstream stream) {
          return nccl_api().ncclBroadcast(t.data_ptr(), t.data_ptr(), size_t(t.numel()), nccl_type(t, "broadcast"), src,
                                          comm, stream);
        });
    } else if (size > 1 && t.numel() > 0)
      gloo_call("broadcast", [&] {
        gloo::BroadcastOptions o(gloo);
        o.setOutput(static_cast<char*>(t.data_ptr()), size_t(t.numel()) * itemsize(t.dtype()));
        o.setRoot(src);
        o.setTag(tag++);
        gloo::broadcast(o);
      });
    written(t);
  }

  void all_gather(const Tensor& out, const Tensor& input) {
    check(Collective::all_gather, &input, 0);
    size_t bytes = size_t(input.numel()) * itemsize(input.dtype());
    if (!input.device().is_cpu()) {
      if (bytes > 0)
        nccl_call(input, "all_gather", [&](ncclComm_t comm, CUstream stream) {
          return nccl_api().ncclAllGather(input.data_ptr(), out.data_ptr(), size_t(input.numel()),
                                          nccl_type(input, "all_gather"), comm, stream);
        });
    } else if (size == 1) {
      std::memcpy(out.data_ptr(), input.data_ptr(), bytes);
    } else if (bytes > 0) {
      gloo_call("all_gather", [&] {
        gloo::AllgatherOptions o(gloo);
        o.setInput(static_cast<char*>(input.data_ptr()), bytes);
        o.setOutput(static_cast<char*>(out.data_ptr()), bytes * size_t(size));
        o.setTag(tag++);
        gloo::allgather(o);
      });
    }
    written(out);
  }

  // Gloo has no reduce-scatter in its options API: the input is reduced whole (on a copy), and
  // each rank keeps its part (twice the traffic of a ring reduce-scatter).
  void reduce_scatter(const Tensor& out, const Tensor& input, ReduceOp op) {
    if (!input.device().is_cpu()) {
      check(Collective::reduce_scatter, &input, int64_t(op));
      if (out.numel() > 0)
        nccl_call(input, "reduce_scatter", [&](ncclComm_t comm, CUstream stream) {
          return nccl_api().ncclReduceScatter(input.data_ptr(), out.data_ptr(), size_t(out.numel()),
                                              nccl_type(input, "reduce_scatter"), nccl_op(op), comm, stream);
        });
      written(out);
      return;
    }
    Tensor whole = input.contiguous().clone();
    all_reduce(whole, op);
    size_t part = size_t(out.numel()) * itemsize(out.dtype());
    std::memcpy(out.data_ptr(), static_cast<char*>(whole.data_ptr()) + part * size_t(rank), part);
    written(out);
  }

  void barrier() {
    check(Collective::barrier, nullptr, 0);
    if (size > 1)
      gloo_call("barrier", [&] {
        gloo::BarrierOptions o(gloo);
        o.setTag(tag++);
        gloo::barrier(o);
      });
  }
};

namespace {

int env_int(const char* var, int given, int lo, int hi) {
  if (given >= 0) return given;
  KILN_CHECK(setting(var), "init_process_group: ", var, " is not set (start the processes with `kiln run --nproc N "
             "program`, or set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT as torchrun does)");
  return int(int_setting(var, 0, lo, hi));
}

// A CPU tensor that a collective may read and write in place.
void check_tensor(std::string_view op, const char* role, const Tensor& t) {
  KILN_CHECK(t.defined(), op, ": the ", role, " tensor is undefined");
  KILN_CHECK(t.device().is_cpu() || nccl_available(), op, ": the ", role, " tensor is on ", t.device().str(),
             ", and collectives on CUDA tensors need NCCL: ", nccl_unavailable_reason());
  KILN_CHECK(t.is_contiguous(), op, ": the ", role, " tensor (", t.dtype(), to_string(t.shape()),
             ") is not contiguous; collectives work in place on contiguous tensors (call .contiguous() first)");
  KILN_CHECK(t.dim() <= kMaxDims, op, ": the ", role, " tensor has ", t.dim(), " dims; at most ", kMaxDims);
}

// Gloo writes to its peers with writev(), which raises SIGPIPE when a peer has died; by default
// that signal kills this process before Gloo can report the closed connection as an error.
// Python (and so PyTorch) ignores SIGPIPE at startup; a C++ program has to do it here. A handler
// the program installed itself is left alone.
void ignore_sigpipe() {
  struct sigaction current {};
  if (sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) std::signal(SIGPIPE, SIG_IGN);
}

// The live groups by id.
struct Groups {
  std::mutex mu;
  int64_t next = 1;
  std::map<int64_t, ProcessGroup*> live;
};
Groups& groups() {
  static Groups g;
  return g;
}

}  // namespace

ProcessGroup& group_with_id(int64_t id) {
  Groups& g = groups();
  std::lock_guard<std::mutex> lock(g.mu);
  auto it = g.live.find(id);
  KILN_CHECK(it != g.live.end(), "distributed: process group ", id, " was destroyed (a compiled function that "
             "communicates through a group must not outlive it)");
  return *it->second;
}

ProcessGroup::ProcessGroup(const InitOptions& options) : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.size = env_int("WORLD_SIZE", options.world_size, 1, 1 << 20);
  s.rank = env_int("RANK", options.rank, 0, s.size - 1);
  KILN_CHECK(s.rank < s.size, "init_process_group: rank ", s.rank, " is not below the world size ", s.size);
  std::string host = !options.master_addr.empty() ? options.master_addr : setting("MASTER_ADDR").value_or("127.0.0.1");
  int port = env_int("MASTER_PORT", options.master_port, 1, 65535);
  s.timeout = options.timeout.count() > 0 ? options.timeout
                                          : std::chrono::milliseconds(int_setting("KILN_DIST_TIMEOUT_S", 300, 1, 86400) * 1000);
  s.store = std::make_unique<distributed::Store>(host, port, s.rank == 0, s.timeout);
  if (s.size > 1) {
    ignore_sigpipe();
    gloo::transport::tcp::attr attr;
    attr.hostname = host == "localhost" ? "127.0.0.1" : host;
    try {
      auto device = gloo::transport::tcp::CreateDevice(attr);
      s.gloo = std::make_shared<gloo::rendezvous::Context>(s.rank, s.size);
      s.gloo->setTimeout(s.timeout);
      GlooStore store(*s.store);
      gloo::rendezvous::PrefixStore prefix("gloo", store);
      s.gloo->connectFullMesh(prefix, device);
    } catch (const gloo::Exception& e) {
      throw_error("init_process_group: rank ", s.rank, " of ", s.size, " could not connect to the others: ", e.what());
    }
  }
  s.thread = std::thread([&s] { s.loop(); });
  Groups& g = groups();
  std::lock_guard<std::mutex> lock(g.mu);
  s.id = g.next++;
  g.live[s.id] = this;
}

ProcessGroup::~ProcessGroup() {
  {
    Groups& g = groups();
    std::lock_guard<std::mutex> lock(g.mu);
    g.live.erase(state_->id);
  }
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->stopping = true;
  }
  state_->cv.notify_one();
  state_->thread.join();
}

int ProcessGroup::rank() const { return state_->rank; }
int ProcessGroup::world_size() const { return state_->size; }
int64_t ProcessGroup::id() const { return state_->id; }

Work ProcessGroup::all_reduce_async(Tensor t, ReduceOp op) {
  check_tensor("all_reduce", "", t);
  return state_->submit([s = state_.get(), t, op] { s->all_reduce(t, op); }, cuda_order({t}));
}

Work ProcessGroup::all_reduce_unchecked_async(Tensor t, ReduceOp op) {
  check_tensor("all_reduce", "", t);
  return state_->submit([s = state_.get(), t, op] { s->all_reduce(t, op, false); }, cuda_order({t}));
}

Work ProcessGroup::broadcast_async(Tensor t, int src) {
  check_tensor("broadcast", "", t);
  KILN_CHECK(src >= 0 && src < world_size(), "broadcast: source rank ", src, " is not in [0, ", world_size(), ")");
  return state_->submit([s = state_.get(), t, src] { s->broadcast(t, src); }, cuda_order({t}));
}

Work ProcessGroup::all_gather_async(Tensor out, Tensor input) {
  check_tensor("all_gather", "output", out);
  check_tensor("all_gather", "input", input);
  KILN_CHECK(out.device() == input.device(), "all_gather: the output is on ", out.device().str(), ", the input on ",
             input.device().str());
  KILN_CHECK(out.dtype() == input.dtype() && out.numel() == input.numel() * world_size(), "all_gather: the output (",
             out.dtype(), to_string(out.shape()), ") must hold world_size (", world_size(), ") times the input (",
             input.dtype(), to_string(input.shape()), ")");
  return state_->submit([s = state_.get(), out, input] { s->all_gather(out, input); }, cuda_order({out, input}));
}

Work ProcessGroup::reduce_scatter_async(Tensor out, Tensor input, ReduceOp op) {
  check_tensor("reduce_scatter", "output", out);
  check_tensor("reduce_scatter", "input", input);
  KILN_CHECK(out.device() == input.device(), "reduce_scatter: the output is on ", out.device().str(), ", the input on ",
             input.device().str());
  KILN_CHECK(out.dtype() == input.dtype() && out.numel() * world_size() == input.numel(), "reduce_scatter: the input (",
             input.dtype(), to_string(input.shape()), ") must hold world_size (", world_size(), ") times the output (",
             out.dtype(), to_string(out.shape()), ")");
  return state_->submit([s = state_.get(), out, input, op] { s->reduce_scatter(out, input, op); },
                        cuda_order({out, input}));
}

Work ProcessGroup::barrier_async() {
  return state_->submit([s = state_.get()] { s->barrier(); });
}

namespace {
std::unique_ptr<ProcessGroup> default_pg;
}  // namespace

ProcessGroup& init_process_group(const InitOptions& options) {
  KILN_CHECK(!default_pg, "init_process_group: the default group exists already (destroy_process_group first)");
  default_pg = std::make_unique<ProcessGroup>(options);
  all_reduce_start_op();  // registered before a graph that holds them is loaded from a file
  all_reduce_wait_op();
  return *default_pg;
}

bool is_initialized() { return default_pg != nullptr; }

ProcessGroup& default_group() {
  KILN_CHECK(default_pg, "distributed: no process group (call distributed::init_process_group() first)");
  return *default_pg;
}

void destroy_process_group() { default_pg.reset(); }
int rank() { return default_group().rank(); }
int world_size() { return default_group().world_size(); }

void all_reduce(const Tensor& t, ReduceOp op) { default_group().all_reduce_async(t, op).wait(); }
void broadcast(const Tensor& t, int src) { default_group().broadcast_async(t, src).wait(); }
void all_gather(const Tensor& out, const Tensor& input) { default_group().all_gather_async(out, input).wait(); }
void reduce_scatter(const Tensor& out, const Tensor& input, ReduceOp op) {
  default_group().reduce_scatter_async(out, input, op).wait();
}
void barrier() { default_group().barrier_async().wait(); }

}  // namespace kiln::distributed
