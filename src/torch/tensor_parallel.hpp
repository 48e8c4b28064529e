// Internal: tensor parallelism (--parallel=tensor) over the workload's MLP,
// as Megatron-LM splits a transformer's MLP.
//
// The MLP's Linears are taken in pairs from the first: (L0, L1), (L2, L3),
// ... The first of a pair is column-parallel: rank r keeps rows
// [r*h/N, (r+1)*h/N) of its weight and bias (its slice of the output
// features) and applies the activation to its slice alone. The second is
// row-parallel: rank r keeps the same columns of its weight (its slice of
// the input features), multiplies its slice of the activations, the ranks'
// partial outputs are all-reduced, and its bias, kept whole on every rank,
// is added once after the sum. Forward needs one all-reduce per pair, and
// backward its conjugate: the gradient of the column-parallel layer's input
// is the sum of every rank's part. With an odd number of Linears the last,
// the output layer, stays whole on every rank (its input is the previous
// pair's summed output, the same on each).
//
// Every rank trains the same batch, so its losses are the single process's
// (the sums' order aside), and what a rank holds of each pair is 1/N: the
// weights, their gradients and optimizer state, and the activations
// between the two layers. The pair's input and output, the logits and the
// unpaired layer are whole on every rank.
#pragma once

#include "memdiag/distributed.hpp"

#include <torch/nn/modules/container/sequential.h>
#include <torch/types.h>

#include <cstdint>
#include <vector>

namespace memdiag {

class TensorParallelMlp {
 public:
  // `model` is the MLP as built_model made it, in host memory. Each of its
  // parameters in turn is cut to this rank's slice (or kept whole), copied
  // into a tensor made with `target` (the run's device and dtype), and the
  // module's parameter made to hold it: the rank never holds more of the
  // weights on the device than its own, and every rank cuts the same whole
  // matrices (the same seed builds the same model on each).
  TensorParallelMlp(torch::nn::Sequential model, Communicator& comm, const torch::TensorOptions& target);

  torch::Tensor forward(torch::Tensor x);

  // The bytes of the split tensors as built (whole, at the target's dtype):
  // the report's model.split_parameter_bytes.
  std::int64_t split_parameter_bytes() const { return split_bytes_; }
  // This rank's slices of the split tensors, and the tensors kept whole.
  const std::vector<torch::Tensor>& split_tensors() const { return split_; }
  const std::vector<torch::Tensor>& whole_tensors() const { return whole_; }

 private:
  enum class Role { kOther, kColumn, kRow };
  torch::nn::Sequential model_;
  Communicator& comm_;
  std::vector<Role> roles_;  // each of the model's modules, in order
  std::vector<torch::Tensor> split_, whole_;
  std::int64_t split_bytes_ = 0;
};

}  // namespace memdiag
