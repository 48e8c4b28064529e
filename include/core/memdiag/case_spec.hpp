// Case files: a workload described as data (cases/*.json), so a user can add a
// case without recompiling. Parsing is strict; every error is an InputError
// naming the file and the JSON path ($.presets.small.model.depth).
#pragma once

#include "memdiag/errors.hpp"

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace memdiag {

enum class Activation { kRelu, kGelu, kTanh };
enum class DType { kFloat32, kBFloat16 };
enum class OptimizerType { kSgd, kAdam, kAdamW };
enum class ModelKind { kMlp, kTransformer };
// How a transformer's attention is computed: `math` spells it out (scores
// of batch x heads x length x length saved for backward, as a model
// written without a fused kernel runs); `sdpa` is PyTorch's fused
// scaled-dot-product attention, its backend (flash, memory-efficient, math)
// chosen by PyTorch for the device and dtype.
enum class AttentionKernel { kMath, kSdpa };

const char* to_string(Activation a);
const char* to_string(DType d);
const char* to_string(OptimizerType o);
const char* to_string(ModelKind k);
const char* to_string(AttentionKernel k);

struct ModelSpec {
  ModelKind kind = ModelKind::kMlp;
  // The MLP: input -> [Linear(hidden) -> activation] x depth -> Linear(output).
  int input_dim = 0;
  int hidden_dim = 0;
  int depth = 0;  // hidden Linear+activation blocks
  int output_dim = 0;
  Activation activation = Activation::kRelu;
  DType dtype = DType::kFloat32;
  // The decoder-only transformer (kind kTransformer): token and position
  // embeddings, `layers` pre-norm blocks of causal self-attention and a
  // GELU feed-forward, a final norm and the vocabulary head, trained on
  // next-token prediction over `sequence_length` tokens.
  int vocab = 0;
  int sequence_length = 0;
  int width = 0;
  int heads = 0;
  int layers = 0;
  int ffn_width = 0;
  double dropout = 0;
  bool tied_embeddings = true;  // the head reuses the token embedding's weights
  AttentionKernel attention = AttentionKernel::kMath;
};

struct OptimizerSpec {
  OptimizerType type = OptimizerType::kSgd;
  double lr = 1e-3;
  double momentum = 0.0;  // sgd
  double weight_decay = 0.0;
  double beta1 = 0.9;  // adam, adamw
  double beta2 = 0.999;
  double eps = 1e-8;
};

// How long each step's autograd graph lives. Both true is the classic leak:
// backward(retain_graph=True) plus a list of graph-connected losses.
struct GraphLifetime {
  bool retain_graph = false;
  bool keep_graph_connected_loss = false;
};

struct PresetSpec {
  ModelSpec model;
  int batch_size = 1;
  int steps = 1;
};

struct CaseSpec {
  std::string name;
  std::string description;
  std::string source;    // the file it came from
  bool builtin = false;  // found by name in a case directory, not given as a path
  OptimizerSpec optimizer;
  GraphLifetime graph;
  std::string default_preset = "small";
  std::map<std::string, PresetSpec> presets;
  // Shapes that vary from step to step, as data: step i trains
  // batch_samples(batch, i) samples, the batch times the schedule's entry
  // i modulo its length (rounded, at least 1), as dynamic batching by token
  // count or a batch-size ramp would. Empty: every step the same batch.
  std::vector<double> batch_schedule;

  // The samples step `step` trains for a run asked for `batch` per step.
  std::int64_t batch_samples(std::int64_t batch, int step) const;
  // The fewest samples any step trains (what accumulation can split).
  std::int64_t min_batch_samples(std::int64_t batch) const;

  // Throws UsageError naming the presets the case has.
  const PresetSpec& preset(const std::string& name) const;
};

// How many parameters the model has as memory_diagnostics builds it (the
// MLP's Linear layers; the transformer's embeddings, blocks, final norm and
// untied head), from its dimensions alone: the report lists each preset's,
// so a suggestion can pick the cheapest other model without building one.
std::int64_t parameter_count(const ModelSpec& m);

// Throws InputError ("<source>: <json path>: <problem>").
CaseSpec parse_case_text(const std::string& text, const std::string& source);
CaseSpec load_case_file(const std::string& path);

// "alpha" is looked up as alpha.json in the search directories in order;
// anything containing '/' or ending in .json is taken as a path. An unknown
// name throws UsageError listing the built-in cases.
CaseSpec resolve_case(const std::string& name_or_path, const std::vector<std::string>& search_dirs);
std::vector<CaseSpec> list_cases(const std::vector<std::string>& search_dirs);

// The case as it was run (the probe that measured it, optimizer, graph
// lifetime and the chosen preset's model) as JSON object text, for the
// report's opaque case detail.
std::string resolved_case_detail(const CaseSpec& c, const std::string& preset, const std::string& probe);

}  // namespace memdiag
