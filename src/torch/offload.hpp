// offload-activations (memdiag/remedy.hpp): an MLP's forward in which each
// Linear and activation keeps what its backward needs in host memory
// (pinned, where CUDA copies from it) instead of on the device, and brings
// it back when backward reaches it. The gradients are computed by the same
// ATen functions autograd's own nodes call, so they are autograd's.
#pragma once

#include "memdiag/case_spec.hpp"

#include <torch/nn/modules/container/sequential.h>

namespace memdiag {

torch::Tensor offloaded_forward(torch::nn::Sequential& seq, Activation activation, const torch::Tensor& input);

}  // namespace memdiag
