#include "memdiag/tensor_parallel_refusal.hpp"

namespace memdiag {

std::optional<std::string> tensor_parallel_refusal(const std::string& case_name, const std::string& preset,
                                                   const ModelSpec& m, const std::vector<Remedy>& remedies,
                                                   std::optional<int> world, int rank_zero_extra_samples) {
  const std::string flag = "--parallel=tensor: ";
  if (!world) {
    return flag + "splits each layer pair across the ranks of a job; start it under a launcher "
                  "(torchrun --nproc-per-node=N --no-python memory_diagnostics ...)";
  }
  if (*world < 2) {
    return flag + "a world of one rank splits nothing; run it over 2 or more ranks";
  }
  if (rank_zero_extra_samples > 0) {
    return flag + "not with --rank-zero-extra-samples (every tensor-parallel rank trains the same batch)";
  }
  if (m.kind == ModelKind::kTransformer) {
    return flag + case_name + " is a transformer; tensor parallelism is implemented for a model that is an MLP "
                              "(its Linear layers split in pairs)";
  }
  if (m.hidden_dim % *world != 0) {
    return flag + case_name + " preset " + preset + " has hidden width " + std::to_string(m.hidden_dim) +
           ", which " + std::to_string(*world) + " ranks do not divide (each holds hidden/N features of every "
           "split layer); run it over a world size that divides " + std::to_string(m.hidden_dim);
  }
  for (const Remedy& r : remedies) {
    const char* why = nullptr;
    switch (r.kind) {
      case RemedyKind::kCheckpoint:
        why = "recomputes the model's modules inside backward, past the split layers' all-reduces";
        break;
      case RemedyKind::kOffloadActivations:
        why = "runs the model's layers itself to save their tensors on the host, past the split layers' all-reduces";
        break;
      case RemedyKind::kAdafactor:
        why = "factors each weight matrix's second moment into its row and column means, which a slice of the "
              "matrix does not have";
        break;
      case RemedyKind::kAccumulate:
      case RemedyKind::kBf16:
      case RemedyKind::kAutocastBf16:
      case RemedyKind::kEmptyCache:
      case RemedyKind::kFixGraph:
      case RemedyKind::kSgd:
      case RemedyKind::kEfficientAttention:
      case RemedyKind::kStateBf16:
      case RemedyKind::kState8bit:
      case RemedyKind::kOffloadState:
      case RemedyKind::kSplit:
      case RemedyKind::kExpandableSegments:
      case RemedyKind::kMaxSplit:
      case RemedyKind::kGcThreshold:
      case RemedyKind::kRoundupPow2: break;
    }
    if (why != nullptr) {
      return flag + "not with --remedy " + to_string(r.kind) + " (it " + why +
             "); the other remedies, accumulate and split among them, combine with it";
    }
  }
  return std::nullopt;
}

}  // namespace memdiag
