#include "memdiag/parallelism.hpp"

#include "memdiag/enum_names.hpp"

#include <algorithm>

namespace memdiag {

const char* to_string(ParallelMode m) {
  switch (m) {
    case ParallelMode::kNone: return "none";
    case ParallelMode::kDdp: return "ddp";
    case ParallelMode::kZero1: return "zero1";
    case ParallelMode::kZero2: return "zero2";
    case ParallelMode::kZero3: return "zero3";
    case ParallelMode::kTensor: return "tensor";
  }
  return nullptr;  // past the last value: all_values() stops here
}

const ParallelModeDefinition& definition(ParallelMode m) {
  static const ParallelModeDefinition none{ParallelMode::kNone, "one process", "", false, {}, false, false, false};
  static const ParallelModeDefinition ddp{
      ParallelMode::kDdp, "data parallel, the model state replicated on every rank (gradients averaged in buckets)", "",
      false, {}, false, false, false};
  static const ParallelModeDefinition zero1{
      ParallelMode::kZero1,
      "data parallel with the optimizer state sharded (ZeRO-1): each rank keeps and updates its shard's state",
      "--shard=optimizer", true, {Cause::kOptimizerState}, false, false, false};
  static const ParallelModeDefinition zero2{
      ParallelMode::kZero2,
      "data parallel with gradients and optimizer state sharded (ZeRO-2): each unit's gradients reduce-scattered "
      "after its backward, each rank steps its shard, the weights all-gathered",
      "--shard=gradients", true, {Cause::kOptimizerState}, true, false, false};
  static const ParallelModeDefinition zero3{
      ParallelMode::kZero3,
      "fully sharded (ZeRO-3, FSDP): each rank keeps its shard of every unit's parameters, gathered before the "
      "unit's forward and backward and freed after each",
      "--shard=parameters", true, {Cause::kOptimizerState, Cause::kParameters}, true, true, false};
  static const ParallelModeDefinition tensor{
      ParallelMode::kTensor,
      "tensor parallel (Megatron-LM's MLP): the Linears in pairs, the first of each split by its output features "
      "(column-parallel), the second by its input features (row-parallel, partial outputs all-reduced, its bias "
      "added once); every rank trains the same batch on its slice of each pair's weights, gradients, optimizer "
      "state and the activations between them",
      "--parallel=tensor", false,
      {Cause::kOptimizerState, Cause::kParameters, Cause::kActivations}, false, false, true};
  switch (m) {
    case ParallelMode::kNone: return none;
    case ParallelMode::kDdp: return ddp;
    case ParallelMode::kZero1: return zero1;
    case ParallelMode::kZero2: return zero2;
    case ParallelMode::kZero3: return zero3;
    case ParallelMode::kTensor: return tensor;
  }
  return none;
}

std::vector<ParallelMode> modes_answering(Cause c) {
  std::vector<ParallelMode> out;
  for (ParallelMode m : all_values<ParallelMode>()) {
    const auto& a = definition(m).answers;
    if (std::find(a.begin(), a.end(), c) != a.end()) out.push_back(m);
  }
  return out;
}

bool is_sharded(ParallelMode m) { return definition(m).shards_optimizer_state || definition(m).splits_layers; }

double model_state_per_rank(ParallelMode m, double parameter_mib, double state_per_parameter, int n,
                            double split_parameter_mib) {
  const ParallelModeDefinition& d = definition(m);
  const double share = n > 0 ? 1.0 / n : 1.0;
  if (d.splits_layers) return (2 + state_per_parameter) * parameters_per_rank(m, parameter_mib, n, split_parameter_mib);
  return parameter_mib * ((d.shards_parameters ? share : 1.0) + (d.shards_gradients ? share : 1.0) +
                          state_per_parameter * (d.shards_optimizer_state ? share : 1.0));
}

double parameters_per_rank(ParallelMode m, double parameter_mib, int n, double split_parameter_mib) {
  const ParallelModeDefinition& d = definition(m);
  const double share = n > 0 ? 1.0 / n : 1.0;
  if (d.splits_layers) return parameter_mib - split_parameter_mib + split_parameter_mib * share;
  return parameter_mib * (d.shards_parameters ? share : 1.0);
}

}  // namespace memdiag
