#include "memdiag/output_names.hpp"

#include "memdiag/errors.hpp"
#include "memdiag/run_identity.hpp"

#include <algorithm>

// String operations rather than std::filesystem: this file is linked into
// the LibTorch executable too (see atomic_file.cpp).
namespace memdiag {

std::string file_name_part(const std::string& name) {
  std::string s = name.empty() || name.front() == '.' ? "_" : "";
  for (const char c : name) {
    if (s.size() == kMaxFileNamePart) break;
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-' || c == '=' || c == '+';
    s += ok ? c : '_';
  }
  return s;
}

Varying varying(const std::vector<RunLabel>& runs) {
  // A setting varies when it differs between runs of the same case: alpha
  // and gamma at their own default batch sizes do not make the batch vary.
  std::vector<RunIdentity> ids;
  ids.reserve(runs.size());
  for (const RunLabel& r : runs) {
    RunIdentity id;
    id.case_name = r.case_name;
    id.preset = r.preset;
    id.batch = r.batch;
    id.steps = r.steps;
    if (r.sequence_length > 0) id.sequence_length = r.sequence_length;
    id.remedies = parse_remedies("remedy", r.remedy);
    ids.push_back(std::move(id));
  }
  Varying v;
  for (Aspect a : varying_aspects(ids, {Aspect::kCase, Aspect::kPreset, Aspect::kBatch, Aspect::kSteps, Aspect::kSequence,
                                          Aspect::kVariant})) {
    switch (a) {
      case Aspect::kCase: v.case_name = true; break;
      case Aspect::kPreset: v.preset = true; break;
      case Aspect::kBatch: v.batch = true; break;
      case Aspect::kSteps: v.steps = true; break;
      case Aspect::kSequence: v.sequence = true; break;
      case Aspect::kVariant: v.remedy = true; break;
      case Aspect::kProducer:
      case Aspect::kDeviceKind:
      case Aspect::kDeviceIndex:
      case Aspect::kSeed:
      case Aspect::kMemoryLimit:
      case Aspect::kWorld:
      case Aspect::kRank:
      case Aspect::kLaunch: break;
    }
  }
  return v;
}

const char* output_placeholders() { return "{case}, {preset}, {batch}, {steps}, {seq}, {remedy}, {name}, {rank}"; }

std::string expand_output(const std::string& templ, const RunLabel& run) {
  std::string out;
  for (std::size_t i = 0; i < templ.size();) {
    if (templ[i] != '{') {
      out += templ[i++];
      continue;
    }
    const auto close = templ.find('}', i);
    if (close == std::string::npos) throw UsageError("--output: '{' without '}' in '" + templ + "'");
    const std::string word = templ.substr(i + 1, close - i - 1);
    if (word == "case") {
      out += file_name_part(run.case_name);
    } else if (word == "preset") {
      out += file_name_part(run.preset);
    } else if (word == "batch") {
      out += std::to_string(run.batch);
    } else if (word == "steps") {
      out += std::to_string(run.steps);
    } else if (word == "seq") {
      if (run.sequence_length <= 0) throw UsageError("--output: {seq} is for a transformer's sequence length; " + run.case_name + " has none");
      out += std::to_string(run.sequence_length);
    } else if (word == "remedy") {
      out += file_name_part(run.remedy);
    } else if (word == "name") {
      if (run.name.empty()) throw UsageError("--output: {name} is for plan files (--plan)");
      out += file_name_part(run.name);
    } else if (word == "rank") {
      out += "{rank}";
    } else {
      throw UsageError("--output: unknown placeholder {" + word + "} (known: " + output_placeholders() + ")");
    }
    i = close + 1;
  }
  return out;
}

std::string default_output_name(const RunLabel& run, const Varying& v) {
  if (!run.name.empty()) return file_name_part(run.name) + ".json";
  std::string s = file_name_part(run.case_name);
  if (v.preset) s += "-" + file_name_part(run.preset);
  if (v.batch) s += "-batch" + std::to_string(run.batch);
  if (v.steps) s += "-steps" + std::to_string(run.steps);
  if (v.sequence && run.sequence_length > 0) s += "-seq" + std::to_string(run.sequence_length);
  if (v.remedy) s += "-" + (run.remedy == "none" ? std::string("baseline") : file_name_part(run.remedy));
  return s + ".json";
}

std::string max_batch_output_name(const RunLabel& run) { return file_name_part(run.case_name) + "-max-batch.json"; }

std::string describe_run(const RunLabel& run, const Varying& v) {
  if (!run.name.empty()) return run.name;
  std::string s = run.case_name;
  if (v.preset) s += " preset " + run.preset;
  if (v.batch) s += " batch " + std::to_string(run.batch);
  if (v.steps) s += " steps " + std::to_string(run.steps);
  if (v.sequence && run.sequence_length > 0) s += " length " + std::to_string(run.sequence_length);
  if (v.remedy) s += " remedy " + run.remedy;
  return s;
}

std::string output_for_rank(const std::string& output, int rank, int world_size) {
  const std::string token = "{rank}";
  std::string out = output;
  if (out.find(token) != std::string::npos) {
    for (auto pos = out.find(token); pos != std::string::npos; pos = out.find(token, pos)) {
      out.replace(pos, token.size(), std::to_string(rank));
    }
    return out;
  }
  if (world_size <= 1) return out;
  // Before the extension of the file name: out/beta.json -> out/beta-rank1.json.
  const auto slash = out.find_last_of('/');
  const std::size_t base = slash == std::string::npos ? 0 : slash + 1;
  auto dot = out.find_last_of('.');
  if (dot == std::string::npos || dot <= base) dot = out.size();
  return out.substr(0, dot) + "-rank" + std::to_string(rank) + out.substr(dot);
}

std::string normal_path(const std::string& path) {
  if (path.empty()) return path;
  const bool absolute = path.front() == '/';
  std::vector<std::string> parts;
  std::size_t i = 0;
  while (i <= path.size()) {
    const auto slash = path.find('/', i);
    const std::string part = path.substr(i, slash == std::string::npos ? std::string::npos : slash - i);
    if (part == "..") {
      if (!parts.empty() && parts.back() != "..") {
        parts.pop_back();
      } else if (!absolute) {
        parts.push_back(part);
      }
    } else if (!part.empty() && part != ".") {
      parts.push_back(part);
    }
    if (slash == std::string::npos) break;
    i = slash + 1;
  }
  std::string out = absolute ? "/" : "";
  for (std::size_t k = 0; k < parts.size(); ++k) out += (k ? "/" : "") + parts[k];
  return out.empty() ? "." : out;
}

std::string unique_output(const std::string& dir, const std::string& stem, std::set<std::string>& taken,
                          const std::string& suffix) {
  const std::string safe = file_name_part(stem);
  for (int n = 1;; ++n) {
    const std::string name = safe + (n == 1 ? "" : "-" + std::to_string(n)) + suffix + ".json";
    const std::string path = dir.empty() ? name : (dir.back() == '/' ? dir + name : dir + "/" + name);
    if (taken.insert(normal_path(path)).second) return path;
  }
}

}  // namespace memdiag
