// Activation checkpointing for LibTorch, which has none of its own
// (pytorch#52744). The semantics of
// torch.utils.checkpoint.checkpoint_sequential(seq, segments, x,
// use_reentrant=True): the modules are cut into `segments` pieces; every
// piece but the last runs without keeping its intermediates, saving only its
// input, and is run again in backward; the last runs normally.
#pragma once

#include <torch/nn/modules/container/sequential.h>

namespace memdiag {

// autocast_bf16: the forward ran under bf16 autocast, so the recomputation
// must too.
torch::Tensor checkpoint_sequential(torch::nn::Sequential& seq, int segments, const torch::Tensor& input,
                                    bool autocast_bf16);

// A Sequential's modules [begin, end) as one function.
torch::Tensor run_modules(torch::nn::Sequential& seq, std::size_t begin, std::size_t end, torch::Tensor x);

}  // namespace memdiag
