#include "memdiag/run_identity.hpp"

#include <algorithm>
#include <map>
#include <sstream>

namespace memdiag {

RunIdentity identity_of(const CaseInfo& c, const RunConfig& config, const Producer& producer) {
  RunIdentity id;
  id.case_name = c.name;
  id.producer = producer.name;
  const auto colon = config.device.find(':');
  id.device_kind = config.device.substr(0, colon);
  if (colon != std::string::npos) {
    const std::string index = config.device.substr(colon + 1);
    // Checked by the reader; an index that is not a small number is 0 here.
    id.device_index = !index.empty() && index.size() <= 6 && index.find_first_not_of("0123456789") == std::string::npos
                          ? std::stoi(index)
                          : 0;
  }
  id.preset = config.preset;
  id.batch = config.batch_size_per_device;
  id.steps = config.steps;
  id.sequence_length = config.sequence_length;
  id.seed = config.seed;
  id.memory_limit_mib = config.memory_limit_mib;
  id.remedies = config.remedies;
  id.mode = config.parallel.mode;
  id.allocator_settings = config.allocator_settings;
  id.world_size = config.parallel.world_size;
  id.rank_zero_extra_samples = config.parallel.rank_zero_extra_samples;
  id.rank = config.parallel.rank;
  id.unit_modules = config.parallel.unit_modules;
  id.prefetch_next = config.parallel.prefetch_next;
  id.variant_name = config.variant;
  id.launch = config.parallel.launch;
  return id;
}

RunIdentity identity_of(const Report& r) { return identity_of(r.case_info, r.config, r.producer); }

bool is_baseline_variant(const RunIdentity& id) {
  return id.remedies.empty() && !is_sharded(id.mode) && id.allocator_settings.empty() &&  // the settings as run
         id.variant_name.empty();
}

std::string variant_label(const RunIdentity& id) {
  // Run-scoped remedies by name; allocator settings in PyTorch's words, as
  // the process ran under them (a setting from a remedy or from the
  // environment is the same variant), or as asked where nothing read them
  // back (the CPU).
  std::vector<Remedy> run_scoped;
  for (const Remedy& r : id.remedies) {
    if (definition(r.kind).scope == RemedyDefinition::Scope::kRun) run_scoped.push_back(r);
  }
  std::string s = run_scoped.empty() ? std::string() : remedies_label(run_scoped);
  auto add = [&s](const std::string& part) { s += (s.empty() ? "" : "+") + part; };
  if (!id.variant_name.empty()) s = id.variant_name + (s.empty() ? "" : "+" + s);
  if (is_sharded(id.mode)) {
    std::string mode = to_string(id.mode);
    if (definition(id.mode).shards_gradients) {
      if (id.unit_modules != 1) mode += ":units=" + std::to_string(id.unit_modules);
      if (id.prefetch_next) mode += ":prefetch";
    }
    add(mode);
  }
  const std::string settings = id.allocator_settings.empty() ? allocator_settings_of(id.remedies) : id.allocator_settings;
  if (!settings.empty()) add(settings);
  return s.empty() ? "none" : s;
}

const char* to_string(Aspect a) {
  switch (a) {
    case Aspect::kCase: return "case";
    case Aspect::kProducer: return "producer";
    case Aspect::kDeviceKind: return "device_kind";
    case Aspect::kDeviceIndex: return "device_index";
    case Aspect::kPreset: return "preset";
    case Aspect::kBatch: return "batch";
    case Aspect::kSteps: return "steps";
    case Aspect::kSequence: return "sequence";
    case Aspect::kSeed: return "seed";
    case Aspect::kMemoryLimit: return "memory_limit";
    case Aspect::kVariant: return "variant";
    case Aspect::kWorld: return "world";
    case Aspect::kRank: return "rank";
    case Aspect::kLaunch: return "launch";
  }
  return nullptr;  // past the last value: all_values() stops here
}

bool Projection::keeps_aspect(Aspect a) const { return std::find(keeps.begin(), keeps.end(), a) != keeps.end(); }

namespace projection {
using A = Aspect;
const Projection kVerdictPool{
    "verdict_pool", "the same case on the same kind of device, world and memory limit, by the same producer",
    {A::kCase, A::kProducer, A::kDeviceKind, A::kWorld, A::kMemoryLimit}};
const Projection kBaselineMatch{
    "baseline_match", "the same configuration in everything but the device index",
    {A::kCase, A::kProducer, A::kDeviceKind, A::kPreset, A::kBatch, A::kSteps, A::kSequence, A::kSeed, A::kMemoryLimit,
     A::kVariant, A::kWorld, A::kRank}};
const Projection kVariantBaseline{
    "variant_baseline", "the same configuration in everything but the variant and the device index",
    {A::kCase, A::kProducer, A::kDeviceKind, A::kPreset, A::kBatch, A::kSteps, A::kSequence, A::kSeed, A::kMemoryLimit, A::kWorld,
     A::kRank}};
const Projection kBatchSweep{
    "batch_sweep", "the same verdict pool, preset, steps, variant and rank; the batch (and seed) may differ",
    {A::kCase, A::kProducer, A::kDeviceKind, A::kWorld, A::kMemoryLimit, A::kPreset, A::kSteps, A::kSequence, A::kVariant, A::kRank}};
const Projection kParameterSweep{
    "parameter_sweep", "the same verdict pool, variant and rank; preset, batch, steps and seed may differ",
    {A::kCase, A::kProducer, A::kDeviceKind, A::kWorld, A::kMemoryLimit, A::kVariant, A::kRank}};
const Projection kStepsSweep{
    "steps_sweep", "the same verdict pool, preset, batch, variant and rank; the steps (and seed) may differ",
    {A::kCase, A::kProducer, A::kDeviceKind, A::kWorld, A::kMemoryLimit, A::kPreset, A::kBatch, A::kSequence, A::kVariant, A::kRank}};
const Projection kSequenceSweep{
    "sequence_sweep", "the same verdict pool, preset, batch, steps, variant and rank; the sequence length (and seed) may differ",
    {A::kCase, A::kProducer, A::kDeviceKind, A::kWorld, A::kMemoryLimit, A::kPreset, A::kBatch, A::kSteps, A::kVariant,
     A::kRank}};
const Projection kRankSet{
    "rank_set", "the same configuration and launch in everything but the rank and the device index",
    {A::kCase, A::kProducer, A::kDeviceKind, A::kPreset, A::kBatch, A::kSteps, A::kSequence, A::kSeed, A::kMemoryLimit,
     A::kVariant, A::kWorld, A::kLaunch}};

const std::vector<const Projection*>& all() {
  static const std::vector<const Projection*> v = {&kVerdictPool, &kBaselineMatch, &kVariantBaseline, &kBatchSweep,
                                                   &kParameterSweep, &kStepsSweep, &kSequenceSweep, &kRankSet};
  return v;
}
}  // namespace projection

namespace {

// Shortest spelling that reads back as the same double: a limit of 40 is
// "40", not "40.000000".
std::string number(double v) {
  std::ostringstream os;
  os << v;
  if (std::stod(os.str()) == v) return os.str();
  std::ostringstream exact;
  exact.precision(17);
  exact << v;
  return exact.str();
}

std::string value(Aspect a, const RunIdentity& id) {
  switch (a) {
    case Aspect::kCase: return id.case_name;
    case Aspect::kProducer: return id.producer;
    case Aspect::kDeviceKind: return id.device_kind;
    case Aspect::kDeviceIndex: return std::to_string(id.device_index);
    case Aspect::kPreset: return id.preset;
    case Aspect::kBatch: return std::to_string(id.batch);
    case Aspect::kSteps: return std::to_string(id.steps);
    case Aspect::kSequence: return id.sequence_length ? std::to_string(*id.sequence_length) : std::string("none");
    case Aspect::kSeed: return std::to_string(id.seed);
    case Aspect::kMemoryLimit: return id.memory_limit_mib ? number(*id.memory_limit_mib) : std::string("none");
    case Aspect::kVariant: return variant_label(id);
    case Aspect::kWorld:
      return std::to_string(id.world_size) +
             (id.rank_zero_extra_samples ? "+" + std::to_string(id.rank_zero_extra_samples) : std::string());
    case Aspect::kRank: return std::to_string(id.rank);
    case Aspect::kLaunch: return id.launch.empty() ? std::string("none") : id.launch;
  }
  return {};
}

// How describe() words an aspect's value.
std::string words(Aspect a, const RunIdentity& id) {
  switch (a) {
    case Aspect::kCase:
    case Aspect::kDeviceKind: return value(a, id);
    case Aspect::kProducer: return id.producer == kProducerDiagnostics ? std::string() : "by " + id.producer;
    case Aspect::kDeviceIndex: return "device " + value(a, id);
    case Aspect::kPreset: return "preset " + id.preset;
    case Aspect::kBatch: return "batch " + value(a, id);
    case Aspect::kSteps: return value(a, id) + (id.steps == 1 ? " step" : " steps");
    case Aspect::kSequence: return id.sequence_length ? "length " + value(a, id) : std::string();
    case Aspect::kSeed: return id.seed == 0 ? std::string() : "seed " + value(a, id);
    case Aspect::kMemoryLimit: return id.memory_limit_mib ? "limit " + value(a, id) + " MiB" : std::string();
    case Aspect::kVariant: return is_baseline_variant(id) ? std::string() : variant_label(id);
    case Aspect::kWorld:
      return id.world_size == 1 && id.rank_zero_extra_samples == 0
                 ? std::string()
                 : "world " + std::to_string(id.world_size) +
                       (id.rank_zero_extra_samples ? " (rank 0 +" + std::to_string(id.rank_zero_extra_samples) + ")"
                                                   : std::string());
    case Aspect::kRank: return id.world_size == 1 ? std::string() : "rank " + value(a, id);
    case Aspect::kLaunch: return id.launch.empty() ? std::string() : "launch " + id.launch;
  }
  return {};
}

}  // namespace

std::string key(const Projection& p, const RunIdentity& id) {
  std::string k;
  for (Aspect a : p.keeps) {
    k += to_string(a);
    k += '=';
    k += value(a, id);
    k += '\x1f';  // a separator no aspect's value holds unescaped
  }
  return k;
}

bool same(const Projection& p, const RunIdentity& a, const RunIdentity& b) { return key(p, a) == key(p, b); }

std::string describe(const Projection& p, const RunIdentity& id) {
  std::string s;
  for (Aspect a : p.keeps) {
    const std::string w = words(a, id);
    if (!w.empty()) s += (s.empty() ? "" : ", ") + w;
  }
  return s;
}

std::string differences(const Projection& p, const RunIdentity& before, const RunIdentity& after) {
  std::string s;
  for (Aspect a : p.keeps) {
    if (value(a, before) == value(a, after)) continue;
    const std::string b = words(a, before), n = words(a, after);
    s += (s.empty() ? "" : ", ") + (b.empty() ? "none" : b) + " -> " + (n.empty() ? "none" : n);
  }
  return s;
}

std::vector<Aspect> varying_aspects(const std::vector<RunIdentity>& runs, const std::vector<Aspect>& among) {
  std::vector<Aspect> out;
  for (Aspect a : among) {
    bool differs = false;
    if (a == Aspect::kCase) {
      for (const RunIdentity& r : runs) differs = differs || r.case_name != runs.front().case_name;
    } else {
      // The first value of each case; a run that differs from its case's.
      std::map<std::string, std::string> first;
      for (const RunIdentity& r : runs) {
        const std::string v = value(a, r);
        const auto [it, fresh] = first.emplace(r.case_name, v);
        differs = differs || (!fresh && it->second != v);
      }
    }
    if (differs) out.push_back(a);
  }
  return out;
}

}  // namespace memdiag
