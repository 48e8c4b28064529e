// Remedies: changes to a training run that are meant to lower its memory
// without changing what it learns (or, for bf16, changing it measurably).
// A run applies any combination; the report records them so the comparison
// can measure each against the baseline.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace memdiag {

enum class RemedyKind {
  kCheckpoint,    // checkpoint[=N]: activation checkpointing of the MLP in N segments
  kAccumulate,    // accumulate=K: the step's batch in K micro-batches, one optimizer step
  kBf16,          // weights, data and activations in bfloat16
  kAutocastBf16,  // fp32 weights, matmuls autocast to bfloat16
  kEmptyCache,    // the caching allocator's cache emptied after each step
  kFixGraph,      // backward without retain_graph, the logged loss a detached CPU scalar
  kSgd,           // the case's optimizer replaced by stateless SGD
};
const char* to_string(RemedyKind k);

struct Remedy {
  RemedyKind kind = RemedyKind::kSgd;
  // checkpoint: segments (0: the square root of the depth, rounded);
  // accumulate: micro-batches; 0 for the others.
  int param = 0;
  bool operator==(const Remedy& o) const { return kind == o.kind && param == o.param; }
  bool operator<(const Remedy& o) const { return kind != o.kind ? kind < o.kind : param < o.param; }
};

// "checkpoint=4", "accumulate=2", "bf16": how flags, reports and file names
// spell a remedy.
std::string to_string(const Remedy& r);
// "checkpoint=4+bf16" -> two remedies, sorted; "none" or "" -> none. Throws
// UsageError naming the flag for an unknown remedy, a bad parameter, a
// remedy given twice, or bf16 with autocast-bf16.
std::vector<Remedy> parse_remedies(const std::string& flag, const std::string& text);
// The canonical spelling of a set: "checkpoint=4+bf16", or "none".
std::string remedies_label(const std::vector<Remedy>& remedies);

// With the defaults filled in for a model of `depth` blocks: a bare
// checkpoint becomes checkpoint=N with N the square root of the depth,
// rounded (at least 1), so the report says what ran.
std::vector<Remedy> resolve_remedies(std::vector<Remedy> remedies, int depth);

// The remedy of that kind in the set, if any.
std::optional<Remedy> find_remedy(const std::vector<Remedy>& remedies, RemedyKind kind);

}  // namespace memdiag
