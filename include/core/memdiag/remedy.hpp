// Remedies: changes to a training run that are meant to lower its memory.
// Each is one definition (definition(kind)): its name and parameter, what
// it does in a line, where it acts, the causes it answers and whether it
// changes what the model learns by design. The parser, --help, the
// comparer's suggestions and the docs read that definition; the workload
// (src/torch/workload.cpp) applies it in one exhaustive switch.
#pragma once

#include "memdiag/cause.hpp"

#include <optional>
#include <string>
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
  kEfficientAttention,  // a transformer's attention through PyTorch's fused kernel
  kStateBf16,     // Adam/AdamW's moments kept in bfloat16, the weights in fp32
  kState8bit,     // Adam/AdamW's moments kept in 8 bits, blockwise (memdiag's own quantiser)
  kAdafactor,     // the case's optimizer replaced by Adafactor (torch.optim.Adafactor's algorithm)
  kOffloadState,  // Adam/AdamW's state (and an fp32 copy of the weights) in host memory, stepped there
  kOffloadActivations,  // what the MLP's layers save for backward kept in pinned host memory
  kSplit,         // split=K: the seed's batch splitting, forward in K chunks concatenated, one backward
  // The CUDA caching allocator's settings (PYTORCH_ALLOC_CONF), process-wide:
  kExpandableSegments,  // expandable_segments:True
  kMaxSplit,            // max-split=N: max_split_size_mb:N
  kGcThreshold,         // gc-threshold=P: garbage_collection_threshold:P/100
  kRoundupPow2,         // roundup-pow2=N: roundup_power2_divisions:N
};
// The name flags, reports and file names spell: "autocast-bf16". Its one
// table of names (memdiag/enum_names.hpp).
const char* to_string(RemedyKind k);

struct RemedyDefinition {
  RemedyKind kind = RemedyKind::kCheckpoint;
  // checkpoint[=N] may take a parameter, accumulate=K must, the rest take none.
  enum class Param { kNone, kOptional, kRequired };
  Param param = Param::kNone;
  int min_param = 1;      // the smallest parameter that changes anything
  int max_param = 999999;  // the largest the thing it sets accepts
  bool power_of_two = false;  // the parameter must be one (roundup-pow2)
  const char* syntax;     // "checkpoint[=N]"
  const char* summary;    // what it does, one line for --help and the docs
  // Where it acts. A run-scoped remedy is undone when its run ends; a
  // process-wide one (an allocator setting) cannot be, so a one-process
  // sweep runs it in a child process of its own.
  enum class Scope { kRun, kProcess };
  Scope scope = Scope::kRun;
  std::vector<Cause> answers;     // the causes it is meant to reduce
  bool changes_training = false;  // by design (precision, optimizer); losses say by how much
  // An allocator setting: its key in PYTORCH_ALLOC_CONF; nullptr for the rest.
  const char* allocator_key = nullptr;
  // It replaces spelt-out attention: suggested only for runs whose report
  // says their model computed attention that way (model.attention "math").
  bool needs_math_attention = false;
  // It moves memory from the device to the host (offloading): on the CPU
  // the host is the device, so what it saves there leaves the tracked
  // allocator, not the machine's memory.
  bool moves_to_host = false;
};
const RemedyDefinition& definition(RemedyKind k);
// The remedies meant for a cause, in definition order.
std::vector<RemedyKind> remedies_answering(Cause c);
// "  checkpoint[=N]   activation checkpointing ...", a line per remedy, for --help.
std::string remedies_help(const std::string& indent = "  ");

struct Remedy {
  RemedyKind kind = RemedyKind::kSgd;
  // checkpoint: segments (0: the workload's default);
  // accumulate: micro-batches; 0 for the others.
  int param = 0;
  bool operator==(const Remedy& o) const { return kind == o.kind && param == o.param; }
  bool operator<(const Remedy& o) const { return kind != o.kind ? kind < o.kind : param < o.param; }
};

// The allocator settings a set of remedies asks for, in PYTORCH_ALLOC_CONF's
// syntax and definition order ("expandable_segments:True,max_split_size_mb:64");
// empty when none of them is an allocator setting.
std::string allocator_settings_of(const std::vector<Remedy>& remedies);
// The value a remedy gives its allocator key: "True", "64", "0.60".
std::string allocator_value(const Remedy& r);
// One setting of PYTORCH_ALLOC_CONF: its key and its value, one token or
// (list) the text inside a bracketed list ("256:1,512:2,>:4").
struct AllocatorSetting {
  std::string key;
  std::string value;
  bool list = false;
};
// PYTORCH_ALLOC_CONF's settings read as PyTorch's own parser reads them
// (c10::CachingAllocator::ConfigTokenizer and
// AcceleratorAllocatorConfig::parseArgs, torch 2.11): whitespace anywhere
// is dropped; ',', ':', '[' and ']' are tokens of their own; each setting
// is key:value or key:[list], joined with ',' (one trailing ',' allowed);
// a key given again replaces its value (the last wins), keeping its first
// place. Any key is read; throws UsageError naming `flag` where the text is
// not that grammar. The one reader of that syntax: --allocator-settings,
// the merge below and expandable_segments_on.
std::vector<AllocatorSetting> read_allocator_conf(const std::string& flag, const std::string& text);
// --allocator-settings 'expandable_segments:True,max_split_size_mb:64' as
// the remedies that set them (read by read_allocator_conf: the last value
// of a key wins, as in PyTorch); throws UsageError naming the flag for a key
// memdiag does not measure, a bad value or a bracketed list (memdiag's
// roundup-pow2 is one division count for every size).
std::vector<Remedy> parse_allocator_settings(const std::string& flag, const std::string& text);
// Settings `over` laid on `base` (both PYTORCH_ALLOC_CONF text): keys of
// `over` replace those of `base`; keys in the order memdiag spells them (its
// remedies' order, then any others as they came).
std::string merge_allocator_settings(const std::string& base, const std::string& over);
// Whether a process under these settings (PYTORCH_ALLOC_CONF text, as a
// report's config.allocator_settings holds it) has expandable segments:
// the last expandable_segments value is True. False for text PyTorch would
// not read.
bool expandable_segments_on(const std::string& settings);
// Whether any remedy of the set acts on the whole process.
bool has_process_scope(const std::vector<Remedy>& remedies);

// "checkpoint=4", "accumulate=2", "bf16": how flags, reports and file names
// spell a remedy.
std::string to_string(const Remedy& r);
// "checkpoint=4+bf16" -> two remedies, sorted; "none" or "" -> none. Throws
// UsageError naming the flag for an unknown remedy, a bad parameter, a
// remedy given twice, or bf16 with autocast-bf16.
std::vector<Remedy> parse_remedies(const std::string& flag, const std::string& text);
// The canonical spelling of a set: "checkpoint=4+bf16", or "none".
std::string remedies_label(const std::vector<Remedy>& remedies);

// What the run the remedies apply to offers: the modules checkpointing can
// split the model into, the segments a bare checkpoint means, and the
// samples per step.
struct RemedyContext {
  int checkpoint_modules = 1;
  int checkpoint_default = 1;
  int batch = 1;
  // The model's attention is spelt out (a transformer with the math
  // kernel): what efficient-attention replaces.
  bool math_attention = false;
  // The model is a transformer (offload-activations offloads MLP layers).
  bool transformer = false;
  // The case's optimizer keeps Adam/AdamW's two moments (what state-bf16,
  // state-8bit and offload-state keep otherwise).
  bool adam_state = false;
};
// With the defaults filled in (a bare checkpoint becomes checkpoint=N), so
// the report says what ran. Throws UsageError (naming --remedy) for a set
// the run cannot apply: more checkpoint segments than modules, more
// micro-batches than samples.
std::vector<Remedy> resolve_remedies(std::vector<Remedy> remedies, const RemedyContext& context,
                                     const std::string& case_name);

// The remedy of that kind in the set, if any.
std::optional<Remedy> find_remedy(const std::vector<Remedy>& remedies, RemedyKind kind);

}  // namespace memdiag
