// What the plan checks before a tensor-parallel run starts (--parallel
// tensor): plain values, so the front answers a refused combination
// without LibTorch. The split itself is the torch layer's
// (src/torch/tensor_parallel.hpp).
#pragma once

#include "memdiag/case_spec.hpp"
#include "memdiag/remedy.hpp"

#include <optional>
#include <string>
#include <vector>

namespace memdiag {

// Why a run of `case_name` at `preset` cannot be tensor parallel over
// `world` ranks (nullopt: no launcher), in one line naming the flag and
// what is allowed; nullopt where it can. Refused: one process or a world
// of one rank (nothing to split over), rank 0's extra samples (every rank trains the same batch),
// a transformer (only the MLP is split), a hidden width the world does not
// divide, and the remedies that run the model's modules themselves
// (checkpoint recomputes them, offload-activations saves their tensors) or
// need a whole matrix (adafactor's factored second moment).
std::optional<std::string> tensor_parallel_refusal(const std::string& case_name, const std::string& preset,
                                                   const ModelSpec& m, const std::vector<Remedy>& remedies,
                                                   std::optional<int> world, int rank_zero_extra_samples);

}  // namespace memdiag
