// Internal to memdiag::analysis: modules.cpp, where the forward's memory lives.
#pragma once

#include "memdiag/analysis.hpp"

#include <optional>

namespace memdiag::detail {

// The forward by module, where the report carries one step's.
std::optional<evidence::ForwardByModule> forward_by_module(const RunFeatures& p);

}  // namespace memdiag::detail
