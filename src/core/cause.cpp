#include "memdiag/cause.hpp"

namespace memdiag {

const char* to_string(Cause c) {
  switch (c) {
    case Cause::kActivations: return "activations";
    case Cause::kOptimizerState: return "optimizer_state";
    case Cause::kRetainedGraph: return "retained_graph";
    case Cause::kParameters: return "parameters";
    case Cause::kAllocatorCache: return "allocator_cache";
    case Cause::kFragmentation: return "fragmentation";
    case Cause::kInconclusive: return "inconclusive";
  }
  return nullptr;  // past the last value: all_values() stops here
}

}  // namespace memdiag
