#include "memdiag/remedy.hpp"

#include "memdiag/enum_names.hpp"
#include "memdiag/errors.hpp"
#include "memdiag/suggest.hpp"

#include <algorithm>
#include <cctype>
#include <optional>
#include <sstream>
#include <vector>

namespace memdiag {

const char* to_string(RemedyKind k) {
  switch (k) {
    case RemedyKind::kCheckpoint: return "checkpoint";
    case RemedyKind::kAccumulate: return "accumulate";
    case RemedyKind::kBf16: return "bf16";
    case RemedyKind::kAutocastBf16: return "autocast-bf16";
    case RemedyKind::kEmptyCache: return "empty-cache";
    case RemedyKind::kFixGraph: return "fix-graph";
    case RemedyKind::kSgd: return "sgd";
    case RemedyKind::kEfficientAttention: return "efficient-attention";
    case RemedyKind::kStateBf16: return "state-bf16";
    case RemedyKind::kState8bit: return "state-8bit";
    case RemedyKind::kAdafactor: return "adafactor";
    case RemedyKind::kOffloadState: return "offload-state";
    case RemedyKind::kOffloadActivations: return "offload-activations";
    case RemedyKind::kSplit: return "split";
    case RemedyKind::kExpandableSegments: return "expandable-segments";
    case RemedyKind::kMaxSplit: return "max-split";
    case RemedyKind::kGcThreshold: return "gc-threshold";
    case RemedyKind::kRoundupPow2: return "roundup-pow2";
  }
  return nullptr;  // past the last value: all_values() stops here
}

const RemedyDefinition& definition(RemedyKind k) {
  using P = RemedyDefinition::Param;
  using S = RemedyDefinition::Scope;
  static const RemedyDefinition checkpoint{
      RemedyKind::kCheckpoint, P::kOptional, 1, 999999, false, "checkpoint[=N]",
      "activation checkpointing in N segments (default: the square root of the model's depth); "
      "activations are recomputed in backward",
      S::kRun, {Cause::kActivations}, false};
  static const RemedyDefinition accumulate{
      RemedyKind::kAccumulate, P::kRequired, 2, 999999, false, "accumulate=K",
      "the step's batch in K micro-batches with one optimizer step; the same gradients, 1/K of the activations",
      S::kRun, {Cause::kActivations}, false};
  static const RemedyDefinition bf16{
      RemedyKind::kBf16, P::kNone, 1, 999999, false, "bf16",
      "weights, data and activations in bfloat16: half the bytes of every tensor",
      S::kRun, {Cause::kActivations, Cause::kParameters}, true};
  static const RemedyDefinition autocast{
      RemedyKind::kAutocastBf16, P::kNone, 1, 999999, false, "autocast-bf16",
      "fp32 weights, matrix products autocast to bfloat16 (mixed precision)",
      S::kRun, {Cause::kActivations}, true};
  static const RemedyDefinition empty_cache{
      RemedyKind::kEmptyCache, P::kNone, 1, 999999, false, "empty-cache",
      "the caching allocator's free blocks handed back to the driver after each step (CUDA)",
      S::kRun, {Cause::kAllocatorCache}, false};
  static const RemedyDefinition fix_graph{
      RemedyKind::kFixGraph, P::kNone, 1, 999999, false, "fix-graph",
      "backward without retain_graph and the logged loss a detached CPU scalar",
      S::kRun, {Cause::kRetainedGraph}, false};
  static const RemedyDefinition sgd{
      RemedyKind::kSgd, P::kNone, 1, 999999, false, "sgd",
      "the case's optimizer replaced by stateless SGD (no per-parameter state)",
      S::kRun, {Cause::kOptimizerState}, true};
  static const RemedyDefinition efficient_attention{
      RemedyKind::kEfficientAttention, P::kNone, 1, 999999, false, "efficient-attention",
      "a transformer's attention through PyTorch's fused scaled-dot-product kernel (flash or memory-efficient where "
      "the device and dtype allow) instead of spelt-out scores: the length x length scores are not kept",
      S::kRun, {Cause::kActivations}, false, nullptr, true};
  static const RemedyDefinition state_bf16{
      RemedyKind::kStateBf16, P::kNone, 1, 999999, false, "state-bf16",
      "Adam/AdamW's two moments kept in bfloat16 (4 bytes per parameter instead of 8), the weights and the update "
      "arithmetic in fp32",
      S::kRun, {Cause::kOptimizerState}, true};
  static const RemedyDefinition state_8bit{
      RemedyKind::kState8bit, P::kNone, 1, 999999, false, "state-8bit",
      "Adam/AdamW's moments kept in 8 bits, in blocks of 256 values with a float scale each (the first moment signed, "
      "the second as its square root): about 2 bytes per parameter instead of 8",
      S::kRun, {Cause::kOptimizerState}, true};
  static const RemedyDefinition adafactor{
      RemedyKind::kAdafactor, P::kNone, 1, 999999, false, "adafactor",
      "the case's optimizer replaced by Adafactor as torch.optim.Adafactor defines it (its defaults): a matrix's second "
      "moment kept as a row and a column factor, O(m+n) instead of O(mn), and no first moment",
      S::kRun, {Cause::kOptimizerState}, true};
  static const RemedyDefinition offload_state{
      RemedyKind::kOffloadState, P::kNone, 1, 999999, false, "offload-state",
      "Adam/AdamW's moments and an fp32 copy of the weights kept in host memory and stepped there: each step copies "
      "the gradients to the host and the weights back (no optimizer state on the device)",
      S::kRun, {Cause::kOptimizerState}, false, nullptr, false, true};
  static const RemedyDefinition offload_activations{
      RemedyKind::kOffloadActivations, P::kNone, 1, 999999, false, "offload-activations",
      "what an MLP's layers save for backward copied to pinned host memory in forward and back in backward: the "
      "activations leave the device between the two",
      S::kRun, {Cause::kActivations}, false, nullptr, false, true};
  static const RemedyDefinition split{
      RemedyKind::kSplit, P::kRequired, 2, 999999, false, "split=K",
      "the source's batch splitting: forward in K chunks, the outputs concatenated, one backward; every chunk's "
      "activations are kept until that backward (accumulate=K is the form that divides them)",
      // It answers no cause: it is measured to show the source's form does
      // not help, so a verdict never lists it as a run to make.
      S::kRun, {}, false};
  // The allocator's settings act on the process's allocator, and in it on
  // segments made after they were set: a sweep runs each in a fresh child.
  static const RemedyDefinition expandable{
      RemedyKind::kExpandableSegments, P::kNone, 1, 1, false, "expandable-segments",
      "the CUDA caching allocator maps 2 MiB pages into one growable segment per stream, so freed pages between live "
      "blocks go back and are mapped again where needed (PYTORCH_ALLOC_CONF expandable_segments:True)",
      S::kProcess, {Cause::kFragmentation, Cause::kAllocatorCache}, false, "expandable_segments"};
  static const RemedyDefinition max_split{
      RemedyKind::kMaxSplit, P::kRequired, 21, 1 << 20, false, "max-split=N",
      "cached blocks of more than N MiB are never split for smaller requests (max_split_size_mb:N; N above 20)",
      S::kProcess, {Cause::kFragmentation}, false, "max_split_size_mb"};
  static const RemedyDefinition gc_threshold{
      RemedyKind::kGcThreshold, P::kRequired, 1, 99, false, "gc-threshold=P",
      "free cached blocks are reclaimed once reserved memory passes P% of the memory limit "
      "(garbage_collection_threshold:P/100; acts only with --memory-limit-mib)",
      S::kProcess, {Cause::kAllocatorCache, Cause::kFragmentation}, false, "garbage_collection_threshold"};
  static const RemedyDefinition roundup{
      RemedyKind::kRoundupPow2, P::kRequired, 1, 64, true, "roundup-pow2=N",
      "requests rounded up to one of N steps between powers of two, so shapes that vary reuse blocks "
      "(roundup_power2_divisions:N; N a power of two)",
      S::kProcess, {Cause::kFragmentation}, false, "roundup_power2_divisions"};
  switch (k) {
    case RemedyKind::kCheckpoint: return checkpoint;
    case RemedyKind::kAccumulate: return accumulate;
    case RemedyKind::kBf16: return bf16;
    case RemedyKind::kAutocastBf16: return autocast;
    case RemedyKind::kEmptyCache: return empty_cache;
    case RemedyKind::kFixGraph: return fix_graph;
    case RemedyKind::kSgd: return sgd;
    case RemedyKind::kEfficientAttention: return efficient_attention;
    case RemedyKind::kStateBf16: return state_bf16;
    case RemedyKind::kState8bit: return state_8bit;
    case RemedyKind::kAdafactor: return adafactor;
    case RemedyKind::kOffloadState: return offload_state;
    case RemedyKind::kOffloadActivations: return offload_activations;
    case RemedyKind::kSplit: return split;
    case RemedyKind::kExpandableSegments: return expandable;
    case RemedyKind::kMaxSplit: return max_split;
    case RemedyKind::kGcThreshold: return gc_threshold;
    case RemedyKind::kRoundupPow2: return roundup;
  }
  return checkpoint;
}

std::vector<RemedyKind> remedies_answering(Cause c) {
  std::vector<RemedyKind> out;
  for (RemedyKind k : all_values<RemedyKind>()) {
    const auto& answers = definition(k).answers;
    if (std::find(answers.begin(), answers.end(), c) != answers.end()) out.push_back(k);
  }
  return out;
}

std::string remedies_help(const std::string& indent) {
  std::size_t width = 0;
  for (RemedyKind k : all_values<RemedyKind>()) width = std::max(width, std::string(definition(k).syntax).size());
  std::string out;
  for (RemedyKind k : all_values<RemedyKind>()) {
    const RemedyDefinition& d = definition(k);
    const std::string syntax = d.syntax;
    out += indent + syntax + std::string(width + 2 - syntax.size(), ' ') + d.summary +
           (d.changes_training ? " (changes the training by design)" : "") + "\n";
  }
  return out;
}

std::string to_string(const Remedy& r) {
  std::string s = to_string(r.kind);
  if (r.param > 0) s += "=" + std::to_string(r.param);
  return s;
}

namespace {

std::string known() {
  std::string s;
  for (RemedyKind k : all_values<RemedyKind>()) s += (s.empty() ? "" : ", ") + std::string(definition(k).syntax);
  return s + ", joined with '+'";
}

Remedy parse_one(const std::string& flag, const std::string& item) {
  const auto eq = item.find('=');
  const std::string name = item.substr(0, eq);
  const auto kind = parse_enum<RemedyKind>(name);
  if (!kind) {
    std::vector<std::string> names;
    for (RemedyKind k : all_values<RemedyKind>()) names.emplace_back(to_string(k));
    throw UsageError(flag + ": unknown remedy '" + item + "'" + did_you_mean(name, names) + " (known: " + known() + ")");
  }
  const RemedyDefinition& d = definition(*kind);
  Remedy r{*kind, 0};
  if (eq == std::string::npos) {
    if (d.param == RemedyDefinition::Param::kRequired) {
      throw UsageError(flag + ": " + name + " needs its parameter (" + d.syntax + ")");
    }
    return r;
  }
  const std::string v = item.substr(eq + 1);
  if (d.param == RemedyDefinition::Param::kNone) {
    throw UsageError(flag + ": " + name + " takes no parameter ('" + item + "')");
  }
  if (v.empty() || v.size() > 6 || v.find_first_not_of("0123456789") != std::string::npos || v[0] == '0') {
    throw UsageError(flag + ": '" + item + "': the parameter must be a whole number of 1 or more");
  }
  r.param = std::stoi(v);
  if (r.param < d.min_param) {
    throw UsageError(flag + ": " + item + " changes nothing; give " + std::to_string(d.min_param) + " or more");
  }
  if (r.param > d.max_param) {
    throw UsageError(flag + ": " + item + " is more than " + name + " accepts (at most " +
                     std::to_string(d.max_param) + ")");
  }
  if (d.power_of_two && (r.param & (r.param - 1)) != 0) {
    throw UsageError(flag + ": " + item + ": the parameter must be a power of two (1, 2, 4, 8, ...)");
  }
  return r;
}

}  // namespace

std::vector<Remedy> parse_remedies(const std::string& flag, const std::string& text) {
  std::vector<Remedy> out;
  if (text.empty() || text == "none") return out;
  std::istringstream in(text);
  for (std::string item; std::getline(in, item, '+');) {
    if (item.empty()) throw UsageError(flag + ": empty remedy in '" + text + "'");
    const Remedy r = parse_one(flag, item);
    for (const Remedy& o : out) {
      if (o.kind == r.kind) throw UsageError(flag + ": " + to_string(r.kind) + " given twice in '" + text + "'");
    }
    out.push_back(r);
  }
  if (text.back() == '+') throw UsageError(flag + ": empty remedy in '" + text + "'");
  if (find_remedy(out, RemedyKind::kBf16) && find_remedy(out, RemedyKind::kAutocastBf16)) {
    throw UsageError(flag + ": bf16 and autocast-bf16 exclude each other (bf16 weights leave nothing to autocast)");
  }
  // One way of keeping the optimizer's state at a time.
  std::vector<std::string> state;
  for (RemedyKind k : {RemedyKind::kSgd, RemedyKind::kStateBf16, RemedyKind::kState8bit, RemedyKind::kAdafactor,
                       RemedyKind::kOffloadState}) {
    if (find_remedy(out, k)) state.push_back(to_string(k));
  }
  if (state.size() > 1) {
    throw UsageError(flag + ": " + state[0] + " and " + state[1] +
                     " exclude each other (each decides how the optimizer keeps its state; measure them one at a time)");
  }
  if (find_remedy(out, RemedyKind::kBf16) && (find_remedy(out, RemedyKind::kStateBf16) || find_remedy(out, RemedyKind::kState8bit))) {
    throw UsageError(flag + ": bf16 already keeps the optimizer's state in bfloat16; state-bf16 and state-8bit are for "
                     "fp32 weights");
  }
  if (find_remedy(out, RemedyKind::kOffloadActivations) && find_remedy(out, RemedyKind::kCheckpoint)) {
    throw UsageError(flag + ": offload-activations and checkpoint exclude each other (each decides what backward "
                     "finds saved; measure them one at a time)");
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<Remedy> resolve_remedies(std::vector<Remedy> remedies, const RemedyContext& c, const std::string& case_name) {
  for (Remedy& r : remedies) {
    switch (r.kind) {
      case RemedyKind::kCheckpoint:
        if (r.param == 0) r.param = std::max(1, c.checkpoint_default);
        if (r.param > c.checkpoint_modules) {
          throw UsageError("--remedy: checkpoint=" + std::to_string(r.param) + " is more segments than " + case_name +
                           "'s " + std::to_string(c.checkpoint_modules) + " modules");
        }
        break;
      case RemedyKind::kAccumulate:
        if (r.param > c.batch) {
          throw UsageError("--remedy: accumulate=" + std::to_string(r.param) +
                           " needs at least that many samples per step; " + case_name + " runs " +
                           std::to_string(c.batch));
        }
        break;
      case RemedyKind::kEfficientAttention:
        if (!c.math_attention) {
          throw UsageError("--remedy: efficient-attention replaces a transformer's spelt-out (math) attention; " +
                           case_name + " has none");
        }
        break;
      case RemedyKind::kSplit:
        if (r.param > c.batch) {
          throw UsageError("--remedy: split=" + std::to_string(r.param) + " needs at least that many samples per step; " +
                           case_name + " runs " + std::to_string(c.batch));
        }
        break;
      case RemedyKind::kStateBf16:
      case RemedyKind::kState8bit:
      case RemedyKind::kOffloadState:
        if (!c.adam_state) {
          throw UsageError("--remedy: " + std::string(to_string(r.kind)) + " keeps Adam/AdamW's moments otherwise; " +
                           case_name + "'s optimizer has none");
        }
        break;
      case RemedyKind::kOffloadActivations:
        if (c.transformer) {
          throw UsageError("--remedy: offload-activations offloads an MLP's layers; " + case_name +
                           " is a transformer (checkpoint or efficient-attention measure its activations)");
        }
        break;
      case RemedyKind::kAdafactor:
      case RemedyKind::kBf16:
      case RemedyKind::kAutocastBf16:
      case RemedyKind::kEmptyCache:
      case RemedyKind::kFixGraph:
      case RemedyKind::kSgd:
      case RemedyKind::kExpandableSegments:
      case RemedyKind::kMaxSplit:
      case RemedyKind::kGcThreshold:
      case RemedyKind::kRoundupPow2: break;
    }
  }
  return remedies;
}

std::optional<Remedy> find_remedy(const std::vector<Remedy>& remedies, RemedyKind kind) {
  for (const Remedy& r : remedies) {
    if (r.kind == kind) return r;
  }
  return std::nullopt;
}

std::string allocator_value(const Remedy& r) {
  switch (r.kind) {
    case RemedyKind::kExpandableSegments: return "True";
    case RemedyKind::kGcThreshold: {
      const std::string digits = std::to_string(r.param);
      return std::string("0.") + (r.param < 10 ? "0" : "") + digits;
    }
    case RemedyKind::kMaxSplit:
    case RemedyKind::kRoundupPow2: return std::to_string(r.param);
    case RemedyKind::kCheckpoint:
    case RemedyKind::kAccumulate:
    case RemedyKind::kBf16:
    case RemedyKind::kAutocastBf16:
    case RemedyKind::kEmptyCache:
    case RemedyKind::kFixGraph:
    case RemedyKind::kSgd:
    case RemedyKind::kEfficientAttention:
    case RemedyKind::kStateBf16:
    case RemedyKind::kState8bit:
    case RemedyKind::kAdafactor:
    case RemedyKind::kOffloadState:
    case RemedyKind::kOffloadActivations:
    case RemedyKind::kSplit: break;
  }
  return "";
}

std::string allocator_settings_of(const std::vector<Remedy>& remedies) {
  std::string out;
  for (const Remedy& r : remedies) {
    const char* key = definition(r.kind).allocator_key;
    if (key == nullptr) continue;
    out += (out.empty() ? "" : ",") + std::string(key) + ":" + allocator_value(r);
  }
  return out;
}

std::vector<AllocatorSetting> read_allocator_conf(const std::string& flag, const std::string& text) {
  // The tokens as ConfigTokenizer makes them.
  std::vector<std::string> tokens;
  std::string buffer;
  for (char ch : text) {
    if (ch == ',' || ch == ':' || ch == '[' || ch == ']') {
      if (!buffer.empty()) tokens.push_back(std::move(buffer));
      buffer.clear();
      tokens.emplace_back(1, ch);
    } else if (!std::isspace(static_cast<unsigned char>(ch))) {
      buffer += ch;
    }
  }
  if (!buffer.empty()) tokens.push_back(std::move(buffer));
  const auto fail = [&](const std::string& why) { throw UsageError(flag + ": " + why + " in '" + text + "'"); };
  const auto separator = [](const std::string& t) { return t == "," || t == ":" || t == "[" || t == "]"; };
  std::vector<AllocatorSetting> out;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    AllocatorSetting s;
    s.key = tokens[i];
    if (separator(s.key)) fail(s.key == "," ? "an empty setting" : "'" + s.key + "' where a key should be");
    if (i + 1 >= tokens.size() || tokens[i + 1] != ":") fail("'" + s.key + "' has no value (" + s.key + ":VALUE)");
    i += 2;
    if (i >= tokens.size() || (separator(tokens[i]) && tokens[i] != "[")) {
      fail("'" + s.key + "' has no value (" + s.key + ":VALUE)");
    }
    if (tokens[i] == "[") {
      s.list = true;
      while (++i < tokens.size() && tokens[i] != "]") s.value += tokens[i];
      if (i >= tokens.size()) fail("the list of '" + s.key + "' has no closing ']'");
    } else {
      s.value = tokens[i];
    }
    if (i + 1 < tokens.size()) {
      if (tokens[i + 1] != ",") fail("'" + tokens[i + 1] + "' after " + s.key + "'s value, where ',' should be");
      ++i;
    }
    auto same = std::find_if(out.begin(), out.end(), [&](const AllocatorSetting& o) { return o.key == s.key; });
    if (same != out.end()) *same = std::move(s);  // the last value wins
    else out.push_back(std::move(s));
  }
  return out;
}

std::string merge_allocator_settings(const std::string& base, const std::string& over) {
  std::vector<AllocatorSetting> items = read_allocator_conf("allocator settings", base);
  for (AllocatorSetting& s : read_allocator_conf("allocator settings", over)) {
    auto it = std::find_if(items.begin(), items.end(), [&](const AllocatorSetting& o) { return o.key == s.key; });
    if (it != items.end()) *it = std::move(s);
    else items.push_back(std::move(s));
  }
  auto rank = [](const std::string& key) {
    int i = 0;
    for (RemedyKind k : all_values<RemedyKind>()) {
      if (definition(k).allocator_key && key == definition(k).allocator_key) return i;
      ++i;
    }
    return i;
  };
  std::stable_sort(items.begin(), items.end(), [&](const auto& a, const auto& b) { return rank(a.key) < rank(b.key); });
  std::string out;
  for (const AllocatorSetting& s : items) {
    out += (out.empty() ? "" : ",") + s.key + ":" + (s.list ? "[" + s.value + "]" : s.value);
  }
  return out;
}

bool expandable_segments_on(const std::string& settings) {
  try {
    for (const AllocatorSetting& s : read_allocator_conf("allocator settings", settings)) {
      if (s.key == "expandable_segments") return !s.list && s.value == "True";
    }
  } catch (const UsageError&) {
  }
  return false;
}

bool has_process_scope(const std::vector<Remedy>& remedies) {
  return std::any_of(remedies.begin(), remedies.end(),
                     [](const Remedy& r) { return definition(r.kind).scope == RemedyDefinition::Scope::kProcess; });
}

std::vector<Remedy> parse_allocator_settings(const std::string& flag, const std::string& text) {
  std::vector<Remedy> out;
  std::string keys;
  for (RemedyKind k : all_values<RemedyKind>()) {
    if (definition(k).allocator_key) keys += (keys.empty() ? "" : ", ") + std::string(definition(k).allocator_key);
  }
  for (const AllocatorSetting& s : read_allocator_conf(flag, text)) {
    const std::string item = s.key + ":" + (s.list ? "[" + s.value + "]" : s.value);
    std::optional<RemedyKind> kind;
    for (RemedyKind k : all_values<RemedyKind>()) {
      if (definition(k).allocator_key && s.key == definition(k).allocator_key) kind = k;
    }
    if (!kind) {
      throw UsageError(flag + ": '" + item + "' is not a setting memdiag measures (key:value, with the keys " + keys +
                       ", joined with ',')");
    }
    if (s.list) {
      throw UsageError(flag + ": '" + item + "': bracketed per-interval lists are not supported (" + s.key +
                       " takes one value here" +
                       (*kind == RemedyKind::kRoundupPow2 ? ", the divisions for every size: " + s.key + ":4)" : ")"));
    }
    const std::string& value = s.value;
    std::string remedy = to_string(*kind);
    if (*kind == RemedyKind::kExpandableSegments) {
      // PyTorch reads these two spellings only.
      if (value == "False") continue;  // the default
      if (value != "True") throw UsageError(flag + ": '" + item + "': the value is True or False, as PyTorch spells them");
    } else if (*kind == RemedyKind::kGcThreshold) {
      // A fraction in (0, 1), to the hundredth memdiag records.
      const bool ok = value.size() >= 3 && value.size() <= 4 && value.compare(0, 2, "0.") == 0 &&
                      value.find_first_not_of("0123456789", 2) == std::string::npos;
      if (!ok) throw UsageError(flag + ": '" + item + "': the value is a fraction such as 0.6 or 0.85");
      const int hundredths = std::stoi(value.substr(2)) * (value.size() == 3 ? 10 : 1);
      remedy += "=" + std::to_string(hundredths);
    } else {
      remedy += "=" + value;
    }
    out.push_back(parse_one(flag, remedy));
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string remedies_label(const std::vector<Remedy>& remedies) {
  if (remedies.empty()) return "none";
  std::string s;
  for (const Remedy& r : remedies) s += (s.empty() ? "" : "+") + to_string(r);
  return s;
}

}  // namespace memdiag
