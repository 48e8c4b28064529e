// Internal: the decoder-only transformer a case's model spec describes.
#pragma once

#include "memdiag/case_spec.hpp"

#include <torch/nn/modules/container/sequential.h>

namespace memdiag {

// [embed] [block] x layers [head]: layers + 2 modules, tokens in, logits
// out. Trained at `sequence_length` tokens per sample (the positions
// table has that many rows).
torch::nn::Sequential build_transformer(const ModelSpec& m, int sequence_length);

}  // namespace memdiag
