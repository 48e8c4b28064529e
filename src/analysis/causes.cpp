// The causes memdiag names, in words, with the response each calls for and
// the remedies that would not help. Knowledge keyed on the verdict, never on
// a case's name.
#include "internal.hpp"

namespace memdiag {
namespace {

struct CauseText {
  Cause cause;
  const char* name;
  const char* label;
  const char* response;
  std::vector<const char*> not_helpful;
};

const std::vector<CauseText>& cause_texts() {
  static const std::vector<CauseText> t = {
      {Cause::kActivations, "activations", "forward activations",
       "Reduce the per-device micro-batch (keep the global batch with gradient accumulation), use activation "
       "checkpointing to recompute intermediates in backward, or use lower-precision (bf16) activations or a "
       "memory-efficient kernel.",
       {"empty_cache(): activations are live tensors until backward frees them; the cache holds none of them.",
        "Optimizer-state sharding or a lighter optimizer: the optimizer's state is not what grows with the batch.",
        "Fixing graph lifetime: the post-cleanup allocation is stable, nothing is being retained across steps."}},
      {Cause::kOptimizerState, "optimizer_state", "optimizer state (persistent per-parameter buffers)",
       "Shard optimizer state across data-parallel ranks (ZeRO-1 / FSDP), use a lower-memory optimizer (SGD with "
       "momentum, Adafactor, 8-bit Adam), or keep optimizer state in lower precision where that is acceptable.",
       {"Activation checkpointing: it recomputes forward intermediates; the moment buffers persist between steps "
        "regardless.",
        "A smaller batch: the state is per parameter, not per sample.",
        "empty_cache(): the moments are live tensors held by the optimizer."}},
      {Cause::kRetainedGraph, "retained_graph", "retained autograd graphs (a lifetime bug)",
       "Stop retaining graphs: call backward() without retain_graph, and log losses as detached CPU scalars "
       "(loss.detach().cpu().item(), or a running sum) instead of keeping graph-connected tensors.",
       {"Sharding (FSDP/ZeRO): it divides model state, and merely spreads the leak across processes.",
        "empty_cache(): the retained graphs are live tensors; nothing cached is freed.",
        "Activation checkpointing or a smaller batch: they shrink each retained graph but the growth per step "
        "continues until it runs out.",
        "loss.detach() kept on the GPU: it cuts the graph but keeps the loss tensor's own storage alive."}},
      {Cause::kParameters, "parameters", "model parameters (weights and their gradients)",
       "Shard parameters (FSDP), train in bf16 with fp32 master weights only where needed, or use a smaller "
       "model or parameter-efficient fine-tuning.",
       {"A smaller batch or activation checkpointing: weights do not depend on the batch.",
        "empty_cache(): the weights are live tensors."}},
      {Cause::kAllocatorCache, "allocator_cache", "caching-allocator reserve (cached but free blocks)",
       "Look at fragmentation first (inactive_split_mib); try PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, "
       "and call empty_cache() only to hand memory back to other processes.",
       {"Treating the reserved - allocated gap as a leak: cached blocks are reused by later allocations.",
        "Reducing tensors the model holds: allocated memory is not what is large here."}},
      {Cause::kInconclusive, "inconclusive", "no single dominant cause",
       "Run the confirming commands below; compare reports of the same case that differ in one setting.",
       {}},
  };
  return t;
}

const CauseText& text_of(Cause c) {
  for (const CauseText& t : cause_texts()) {
    if (t.cause == c) return t;
  }
  return cause_texts().back();
}

}  // namespace

const char* to_string(Cause c) { return text_of(c).name; }
const char* cause_label(Cause c) { return text_of(c).label; }

std::optional<Cause> cause_from_string(const std::string& s) {
  for (const CauseText& t : cause_texts()) {
    if (s == t.name) return t.cause;
  }
  return std::nullopt;
}

const std::vector<Cause>& all_causes() {
  static const std::vector<Cause> v = {Cause::kActivations,   Cause::kOptimizerState, Cause::kRetainedGraph,
                                       Cause::kParameters,    Cause::kAllocatorCache, Cause::kInconclusive};
  return v;
}

namespace detail {
const char* cause_response(Cause c) { return text_of(c).response; }
const std::vector<const char*>& cause_not_helpful(Cause c) { return text_of(c).not_helpful; }
}  // namespace detail

}  // namespace memdiag
