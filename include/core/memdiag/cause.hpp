// The causes of memory use memdiag names. The set lives in core, below the
// analysis that decides among them, because remedies and parallel modes
// (also core) say which causes they answer.
#pragma once

namespace memdiag {

enum class Cause { kActivations, kOptimizerState, kRetainedGraph, kParameters, kAllocatorCache, kFragmentation, kInconclusive };
// The identifier, as the JSON output and the --expect and --fail-on gates
// spell it: "optimizer_state". Its one table of names (memdiag/enum_names.hpp).
const char* to_string(Cause c);

}  // namespace memdiag
