// The CUDA caching allocator's settings (PYTORCH_ALLOC_CONF) for this
// process: set before the allocator makes its first segment, and read back
// from the allocator's own configuration, so a report records what the
// process ran under (the environment's settings included), not only what
// was asked for.
#pragma once

#include <string>

namespace memdiag {

// Applies settings in PYTORCH_ALLOC_CONF's syntax (empty: nothing), laid
// on those the process runs under (the environment's stay unless named).
// They act on segments made afterwards, so this is called before the first
// CUDA allocation. Throws memdiag::Error when the allocator refuses them or
// reads back something else.
void apply_allocator_settings(const std::string& settings);

// The allocator's settings now, those that differ from PyTorch's defaults,
// in PYTORCH_ALLOC_CONF's syntax and the order memdiag's remedies spell
// them: "expandable_segments:True,max_split_size_mb:64"; empty for the
// defaults.
std::string current_allocator_settings();

}  // namespace memdiag
