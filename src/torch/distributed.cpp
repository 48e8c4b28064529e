#include "memdiag/distributed.hpp"
#include "build_config.hpp"


#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#if defined(MEMDIAG_HAVE_CUDA) && defined(MEMDIAG_HAVE_NCCL) && defined(USE_C10D_NCCL)
#define MEMDIAG_NCCL 1
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <stdexcept>
#include <thread>

namespace memdiag {
namespace {

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

class C10dCommunicator final : public Communicator {
 public:
  C10dCommunicator(c10::intrusive_ptr<c10d::Backend> pg, std::string name, std::chrono::milliseconds timeout,
                   std::string launch)
      : pg_(std::move(pg)), name_(std::move(name)), timeout_(timeout), launch_(std::move(launch)) {}

  int rank() const override { return pg_->getRank(); }
  int world_size() const override { return pg_->getSize(); }
  std::string backend() const override { return name_; }
  std::string launch_id() const override { return launch_; }

  void broadcast(std::vector<at::Tensor>& tensors, int root) override {
    c10d::BroadcastOptions o;
    o.rootRank = root;
    o.timeout = timeout_;
    for (at::Tensor& t : tensors) {
      std::vector<at::Tensor> one{t};
      finish(pg_->broadcast(one, o));
    }
  }

  void all_reduce_sum(at::Tensor& tensor) override {
    std::vector<at::Tensor> one{tensor};
    c10d::AllreduceOptions o;
    o.timeout = timeout_;
    finish(pg_->allreduce(one, o));
  }

  void all_gather_into(at::Tensor& full, at::Tensor& shard) override {
    c10d::AllgatherOptions o;
    o.timeout = timeout_;
    finish(pg_->_allgather_base(full, shard, o));
  }

  void reduce_scatter_sum(at::Tensor& shard, at::Tensor& full) override {
    if (name_ == "gloo") {
      // Gloo's reduce-scatter is a clone of `full` all-reduced, handed back
      // in a wrapper work while the inner all-reduce (and the clone) stays
      // with the worker thread, which frees the clone whenever it gets to
      // it: seen as one unit's 0.25 MiB more or less at a phase's end on
      // rank 1, 4 runs in 12 under load. All-reduced in place instead: the
      // same sums, no copy, and the work waited for is the one that holds
      // the tensor.
      all_reduce_sum(full);
      const std::int64_t slice = full.numel() / pg_->getSize();
      shard.copy_(full.narrow(0, pg_->getRank() * slice, slice));
      return;
    }
    c10d::ReduceScatterOptions o;
    o.timeout = timeout_;
    finish(pg_->_reduce_scatter_base(shard, full, o));
  }

  void barrier() override {
    c10d::BarrierOptions o;
    o.timeout = timeout_;
    finish(pg_->barrier(o));
  }

 private:
  // Waits for a collective and, on Gloo, until its worker thread has let go
  // of it. Gloo marks the work complete inside its worker, which keeps a
  // reference to the work (and so to every tensor the work holds) until it
  // takes its queue's lock again: 13% of 462 collectives in a world-2
  // ZeRO-3 run were still held when wait() returned. A tensor dropped
  // right after wait() would be freed later, on the worker thread, and a
  // phase's figures would depend on thread scheduling. Waiting here for
  // the last other reference makes every free happen where the code drops
  // the tensor.
  void finish(c10::intrusive_ptr<c10d::Work> work) const {
    work->wait(timeout_);
    if (name_ != "gloo") return;
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    while (work.use_count() > 1 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  }

  c10::intrusive_ptr<c10d::Backend> pg_;
  std::string name_;
  std::chrono::milliseconds timeout_;
  std::string launch_;
};

// 16 hex digits no other launch draws: what makes the ranks of one launch
// one set where several launches' reports are compared together (the same
// command twice has the same MASTER_PORT and torchrun's run id "none").
std::string fresh_launch_id() {
  std::random_device rd;
  const std::uint64_t v = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  static const char* hex = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 0; i < 16; ++i) s[i] = hex[(v >> (60 - 4 * i)) & 0xf];
  return s;
}

}  // namespace

std::optional<std::string> share_cpu_threads(const LaunchInfo& launch) {
  if (env("OMP_NUM_THREADS") || launch.local_world_size <= 1) return std::nullopt;
  const int all = at::get_num_threads();
  const int mine = std::max(1, all / launch.local_world_size);
  if (mine >= all) return std::nullopt;
  at::set_num_threads(mine);
  return "CPU threads: " + std::to_string(mine) + " per rank (the " + std::to_string(all) +
         " a lone process would use, shared among this host's " + std::to_string(launch.local_world_size) +
         " ranks; torchrun sets OMP_NUM_THREADS=1 for the same reason; set OMP_NUM_THREADS to choose)";
}

std::unique_ptr<Communicator> join_process_group(const LaunchInfo& launch, const c10::Device& device,
                                                 std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions so;
  so.port = static_cast<std::uint16_t>(launch.master_port);
  so.isServer = launch.rank == 0 && !launch.agent_store;
  so.numWorkers = launch.world_size;
  so.waitWorkers = false;
  so.timeout = timeout;
  auto tcp = c10::make_intrusive<c10d::TCPStore>(launch.master_addr, so);
  // torchrun's agent store is shared with the launcher; keep our keys apart,
  // and each restart's (--max-restarts: the store outlives an attempt, and
  // a rank must not read the last attempt's check-ins or launch id).
  const std::string attempt = env("TORCHELASTIC_RESTART_COUNT").value_or("0");
  auto store = c10::make_intrusive<c10d::PrefixStore>("memdiag/" + attempt, tcp);
  // Every rank checks in before any backend is made. NCCL's communicator
  // set-up waits inside NCCL for peers, with no timeout of ours: measured on
  // two H200s, a rank whose peer never started hung there for good. Waiting
  // here, on the store, turns that into an error after `timeout`.
  // Rank 0 draws the launch's id before it checks in, so every rank finds
  // it once all have.
  if (launch.rank == 0) {
    const std::string id = fresh_launch_id();
    store->set("launch", std::vector<uint8_t>(id.begin(), id.end()));
  }
  store->set("joined/" + std::to_string(launch.rank), std::vector<uint8_t>{1});
  std::vector<std::string> everyone;
  for (int r = 0; r < launch.world_size; ++r) everyone.push_back("joined/" + std::to_string(r));
  store->wait(everyone, timeout);
  const std::vector<uint8_t> drawn = store->get("launch");
  const std::string launch_id(drawn.begin(), drawn.end());

  if (device.is_cuda()) {
#ifdef MEMDIAG_NCCL
    c10::cuda::set_device(device.index());
    // Let a timed-out collective throw here, so the report is still written,
    // instead of NCCL's watchdog tearing the process down first.
    setenv("TORCH_NCCL_ASYNC_ERROR_HANDLING", "0", /*overwrite=*/0);
    auto opts = c10d::ProcessGroupNCCL::Options::create();
    opts->timeout = timeout;
    auto pg = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, launch.rank, launch.world_size, opts);
    return std::make_unique<C10dCommunicator>(pg, "nccl", timeout, launch_id);
#else
    throw Error("this memdiag was built without NCCL (no nccl.h at build time); data-parallel CUDA runs are unavailable");
#endif
  }
  auto opts = c10d::ProcessGroupGloo::Options::create(timeout);
  // One host: talk over loopback. Several: bind to this host's own address.
  const bool local = launch.master_addr == "localhost" || launch.master_addr.rfind("127.", 0) == 0;
  opts->devices.push_back(local ? c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")
                                : c10d::ProcessGroupGloo::createDefaultDevice());
  auto pg = c10::make_intrusive<c10d::ProcessGroupGloo>(store, launch.rank, launch.world_size, opts);
  return std::make_unique<C10dCommunicator>(pg, "gloo", timeout, launch_id);
}

}  // namespace memdiag
