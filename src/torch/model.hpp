// Internal: the MLP a case's model spec describes.
#pragma once

#include "memdiag/case_spec.hpp"
#include "memdiag/remedy.hpp"

#include <torch/nn/modules/container/sequential.h>

namespace memdiag {

c10::ScalarType model_dtype(const ModelSpec& m);

// The MLP: input -> [Linear(hidden) -> activation] x depth -> Linear(output).
// Every block saves its input and its activation output for backward, so
// activation memory is about 2 * depth * hidden_dim elements per sample.
// The transformer: src/torch/transformer.hpp.
torch::nn::Sequential build_model(const ModelSpec& m);

}  // namespace memdiag
