// Data-parallel runs: joining a c10d process group when a launcher (torchrun)
// started the process, and the few collectives the workload needs. NCCL on
// CUDA, Gloo on the CPU.
#pragma once

#include "memdiag/launch.hpp"

#include <c10/core/Device.h>

#include <ATen/core/Tensor.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace memdiag {

// A CPU rank's share of this host's cores: the intra-op thread pool's
// default (every core) divided among the ranks on the host, unless
// OMP_NUM_THREADS chose. Each rank spinning a thread per core on a host
// its peers share was measured on 2 cores: four ranks of alpha under
// ZeRO-3 took 10.9 s (17.4 s of CPU) with every core's thread each, 3.0 s
// with one. torchrun sets OMP_NUM_THREADS=1 for the same reason. Sets the
// pool and returns what it did, for the reports; nullopt when it left it.
std::optional<std::string> share_cpu_threads(const LaunchInfo& launch);

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual std::string backend() const = 0;
  virtual void broadcast(std::vector<at::Tensor>& tensors, int root) = 0;
  virtual void all_reduce_sum(at::Tensor& tensor) = 0;
  // Every rank's `shard` (equal sizes), concatenated by rank into `full`.
  virtual void all_gather_into(at::Tensor& full, at::Tensor& shard) = 0;
  // `full` summed over the ranks, this rank's slice (full / world) into
  // `shard`. `full` is scratch: what it holds afterwards is unspecified
  // (Gloo sums into it in place).
  virtual void reduce_scatter_sum(at::Tensor& shard, at::Tensor& full) = 0;
  virtual void barrier() = 0;
  // What the ranks of this launch share and no other launch does (the
  // report's config.parallelism.launch); empty where unknown.
  virtual std::string launch_id() const { return {}; }
};

// Connects to the store at MASTER_ADDR:MASTER_PORT (rank 0 hosts it unless
// the agent does) and creates the backend for device. A peer that never
// joins, or dies, makes every call here throw within timeout.
std::unique_ptr<Communicator> join_process_group(const LaunchInfo& launch, const c10::Device& device,
                                                 std::chrono::milliseconds timeout);

}  // namespace memdiag
