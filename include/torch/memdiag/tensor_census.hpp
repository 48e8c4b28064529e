// Counting bytes by role from the live tensors themselves (not the allocator),
// so the allocator-level story can be checked against what actually exists.
#pragma once

#include "memdiag/report.hpp"

#include <torch/optim/optimizer.h>

#include <vector>

namespace memdiag {

// Parameters, their gradients, and the optimizer's per-parameter state
// (SGD momentum, Adam/AdamW moments). Storages are counted once each.
TensorCensus take_census(const std::vector<torch::Tensor>& parameters,
                         const torch::optim::Optimizer* optimizer);

}  // namespace memdiag
