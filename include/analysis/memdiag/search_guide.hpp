#pragma once
// Where --find-max-batch tries next: the capacity model's answer from the
// tries so far, kept strictly inside what is known (above the largest batch
// that completed, below the smallest that ran out). A pure function of the
// tries, so the search is tested without running anything
// (tests/unit/test_search_guide.cpp).
#include "memdiag/report.hpp"

#include <cstdint>
#include <optional>

namespace memdiag {

struct SearchBracket {
  std::int64_t lo = 0;                 // the largest batch that completed (0: none)
  std::optional<std::int64_t> hi;      // the smallest that ran out
};

// The next batch to try after the tries in `search` (at least one), or
// nothing when the bracket is closed (hi = lo + 1), nothing completed, or
// lo reached the largest batch memdiag runs. `max_batch` is that largest.
// `growth_cap`: before anything ran out, no try above that many times the
// largest batch that completed. On the CPU a model read from a small batch
// can aim past what the host holds, where a limit above its memory is
// enforced by the kernel's OOM killer rather than an allocator error; on
// CUDA the allocator refuses at the limit, and such a try costs little.
//
// Doubling then bisection takes about 2 log2(B) tries, most of them near B
// where tries cost most. The model's answer from the first completed try is
// often within a few percent, and from a try near B closer still; so the
// guess is the model's, moved away from the side the last tries landed on
// by a step that doubles while they keep landing there (a model that errs
// low reaches the boundary in log2 of its error), and a bisection where
// the model aims at or past a batch that ran out, or where two tries in a
// row failed to halve the bracket (the safeguard that bounds the search by
// bisection's own count). Replayed on the H200's own searches it takes
// about half their tries (tests/unit/test_search_guide.cpp).
std::optional<std::int64_t> next_search_batch(const CapacitySearch& search, SearchBracket bracket,
                                              std::int64_t max_batch,
                                              std::optional<std::int64_t> growth_cap = std::nullopt);

}  // namespace memdiag
