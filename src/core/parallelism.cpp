#include "memdiag/parallelism.hpp"

#include "memdiag/enum_names.hpp"

#include <algorithm>

namespace memdiag {

const char* to_string(ParallelMode m) {
  switch (m) {
    case ParallelMode::kNone: return "none";
    case ParallelMode::kDdp: return "ddp";
    case ParallelMode::kZero1: return "zero1";
  }
  return nullptr;  // past the last value: all_values() stops here
}

const ParallelModeDefinition& definition(ParallelMode m) {
  static const ParallelModeDefinition none{ParallelMode::kNone, "one process", "", false, {}};
  static const ParallelModeDefinition ddp{
      ParallelMode::kDdp, "data parallel, the model state replicated on every rank (gradients averaged in buckets)", "",
      false, {}};
  static const ParallelModeDefinition zero1{
      ParallelMode::kZero1,
      "data parallel with the optimizer state sharded (ZeRO-1): each rank keeps and updates its shard's state",
      "--shard-optimizer-state", true, {Cause::kOptimizerState}};
  switch (m) {
    case ParallelMode::kNone: return none;
    case ParallelMode::kDdp: return ddp;
    case ParallelMode::kZero1: return zero1;
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

bool is_sharded(ParallelMode m) { return definition(m).shards_optimizer_state; }

}  // namespace memdiag
