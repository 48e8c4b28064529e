// Internal: data parallelism as the workload needs it, over a Communicator.
#pragma once

#include "memdiag/distributed.hpp"

#include <torch/types.h>

#include <cstdint>
#include <vector>

namespace memdiag {

// Gradient averaging through persistent flat buckets, made at the first
// backward as DDP's reducer makes its buckets (25 MiB cap, DDP's default).
// Unlike DDP the all-reduce runs after backward rather than overlapped with
// it; the memory is the same.
class GradientBuckets {
 public:
  void all_reduce(const std::vector<torch::Tensor>& params, Communicator& comm);

 private:
  struct Slot {
    std::size_t param;
    std::int64_t offset;
    std::int64_t numel;
  };
  struct Bucket {
    torch::Tensor flat;
    std::vector<Slot> slots;
  };
  void build(const std::vector<torch::Tensor>& params);

  std::vector<Bucket> buckets_;
};

// ZeRO-1's partition: parameter i belongs to rank owner[i], greedy by size so
// that the shards weigh about the same.
std::vector<int> shard_owners(const std::vector<torch::Tensor>& params, int world);

}  // namespace memdiag
