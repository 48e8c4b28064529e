#include "memdiag/remedy.hpp"

#include "memdiag/enum_names.hpp"
#include "memdiag/errors.hpp"

#include <algorithm>
#include <sstream>

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
  }
  return nullptr;  // past the last value: all_values() stops here
}

const RemedyDefinition& definition(RemedyKind k) {
  using P = RemedyDefinition::Param;
  using S = RemedyDefinition::Scope;
  static const RemedyDefinition checkpoint{
      RemedyKind::kCheckpoint, P::kOptional, 1, "checkpoint[=N]",
      "activation checkpointing in N segments (default: the square root of the model's depth); "
      "activations are recomputed in backward",
      S::kRun, {Cause::kActivations}, false};
  static const RemedyDefinition accumulate{
      RemedyKind::kAccumulate, P::kRequired, 2, "accumulate=K",
      "the step's batch in K micro-batches with one optimizer step; the same gradients, 1/K of the activations",
      S::kRun, {Cause::kActivations}, false};
  static const RemedyDefinition bf16{
      RemedyKind::kBf16, P::kNone, 1, "bf16",
      "weights, data and activations in bfloat16: half the bytes of every tensor",
      S::kRun, {Cause::kActivations, Cause::kParameters}, true};
  static const RemedyDefinition autocast{
      RemedyKind::kAutocastBf16, P::kNone, 1, "autocast-bf16",
      "fp32 weights, matrix products autocast to bfloat16 (mixed precision)",
      S::kRun, {Cause::kActivations}, true};
  static const RemedyDefinition empty_cache{
      RemedyKind::kEmptyCache, P::kNone, 1, "empty-cache",
      "the caching allocator's free blocks handed back to the driver after each step (CUDA)",
      S::kRun, {Cause::kAllocatorCache}, false};
  static const RemedyDefinition fix_graph{
      RemedyKind::kFixGraph, P::kNone, 1, "fix-graph",
      "backward without retain_graph and the logged loss a detached CPU scalar",
      S::kRun, {Cause::kRetainedGraph}, false};
  static const RemedyDefinition sgd{
      RemedyKind::kSgd, P::kNone, 1, "sgd",
      "the case's optimizer replaced by stateless SGD (no per-parameter state)",
      S::kRun, {Cause::kOptimizerState}, true};
  switch (k) {
    case RemedyKind::kCheckpoint: return checkpoint;
    case RemedyKind::kAccumulate: return accumulate;
    case RemedyKind::kBf16: return bf16;
    case RemedyKind::kAutocastBf16: return autocast;
    case RemedyKind::kEmptyCache: return empty_cache;
    case RemedyKind::kFixGraph: return fix_graph;
    case RemedyKind::kSgd: return sgd;
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
  if (!kind) throw UsageError(flag + ": unknown remedy '" + item + "' (known: " + known() + ")");
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
      case RemedyKind::kBf16:
      case RemedyKind::kAutocastBf16:
      case RemedyKind::kEmptyCache:
      case RemedyKind::kFixGraph:
      case RemedyKind::kSgd: break;
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

std::string remedies_label(const std::vector<Remedy>& remedies) {
  if (remedies.empty()) return "none";
  std::string s;
  for (const Remedy& r : remedies) s += (s.empty() ? "" : "+") + to_string(r);
  return s;
}

}  // namespace memdiag
