// Internal: ZeRO-2 and ZeRO-3 (fully sharded data parallel) over a model's
// units, as the workload needs them.
//
// Each unit's parameters are views into one flat buffer of the unit's size
// (padded to a multiple of the world size), as FSDP's flat parameter is;
// this rank owns slice `rank` of it, and the optimizer steps only those
// slices. ZeRO-2 keeps the flat buffers (the whole weights) and all-gathers
// the updated slices after each step; ZeRO-3 keeps only its slices, and
// materialises a unit's buffer for its forward and again for its backward,
// freeing it in between by resizing its storage to zero bytes: the views
// autograd saved for backward stay valid tensors, their memory goes, and a
// gather into the same storage brings it back before they are read (what
// Python FSDP's _free_storage does with UntypedStorage.resize_).
#pragma once

#include "memdiag/distributed.hpp"

#include <torch/types.h>

#include <cstdint>
#include <vector>

namespace memdiag {

class ShardedUnits {
 public:
  // units: each unit's parameters, in the order forward runs them, where
  // the model was built (the host). Each unit in turn is copied into a
  // flat buffer made with `target` (the run's device and dtype), rank 0's
  // copy broadcast, and, under ZeRO-3, freed before the next unit, so a
  // rank never holds more than its slices and one unit's weights: a model
  // whose weights do not fit one device can still train sharded, as FSDP
  // materialises a model built on the host or the meta device.
  ShardedUnits(const std::vector<std::vector<torch::Tensor>>& units, Communicator& comm, bool shard_parameters,
               const torch::TensorOptions& target);

  std::size_t size() const { return units_.size(); }
  // The optimizer's parameters: this rank's flat slice of each unit.
  std::vector<torch::Tensor> shards() const;
  // Every tensor that holds a rank's model state, for the census (it counts
  // each storage once, and a freed one not at all).
  std::vector<torch::Tensor> state_tensors() const;

  // ZeRO-3: unit u's parameters materialised from every rank's slice (a
  // no-op when they are, and under ZeRO-2, where they always are).
  void gather(std::size_t u);
  // ZeRO-3: unit u's full buffer freed (its storage resized to 0 bytes).
  void release(std::size_t u);
  bool gathered(std::size_t u) const { return units_[u].gathered; }
  // Unit u's gradients summed over the ranks, this rank's slice averaged
  // into its shard's gradient, the full gradients dropped.
  void reduce_gradients(std::size_t u);
  // After the optimizer stepped the slices: ZeRO-2 gathers them into the
  // whole weights; ZeRO-3 has nothing to do (the next forward gathers).
  void after_step();

 private:
  struct Unit {
    std::vector<torch::Tensor> params;
    torch::Tensor full;   // [padded]: the parameters are views into it
    torch::Tensor shard;  // [padded / world]: this rank's slice, a leaf the optimizer steps
    std::int64_t numel = 0, padded = 0;
    bool gathered = true;
  };
  Communicator& comm_;
  bool shard_parameters_;
  std::vector<Unit> units_;
};

// Resizes t's storage to `bytes` (0 frees it; growing leaves the new bytes
// uninitialised): ATen's resize-bytes functions, as Python's
// UntypedStorage.resize_ calls them.
void resize_storage_bytes(const torch::Tensor& t, std::size_t bytes);

}  // namespace memdiag
