// What a run is, for every question of the form "are these two runs the
// same configuration?". A run's identity is a handful of aspects (case,
// producer, device, preset, batch, steps, seed, memory limit, variant,
// world, rank); each question the analysis asks is a named projection that
// keeps some aspects and lets the others vary. Grouping, the baseline gate,
// sweeps, remedy tables, capacity fits and per-rank views all compare runs
// through these projections and nothing else.
#pragma once

#include "memdiag/parallelism.hpp"
#include "memdiag/remedy.hpp"
#include "memdiag/report.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace memdiag {

struct RunIdentity {
  std::string case_name;
  std::string producer = kProducerDiagnostics;
  std::string device_kind = "cpu";  // "cpu", "cuda": the machine kind, without the index
  int device_index = 0;
  std::string preset;
  std::int64_t batch = 0;  // batch_size_per_device, as asked
  int steps = 0;           // as asked (a run that stopped early completed fewer)
  std::optional<int> sequence_length;  // a transformer's tokens per sample
  std::uint64_t seed = 0;
  std::optional<double> memory_limit_mib;
  // The variant: what the comparison measures against the baseline run of
  // the same configuration. Remedies, a sharded parallel mode, allocator
  // settings.
  std::vector<Remedy> remedies;
  ParallelMode mode = ParallelMode::kNone;
  std::string allocator_settings;
  int world_size = 1;
  int rank_zero_extra_samples = 0;
  int rank = 0;
  // ZeRO-2/3's units and prefetch: part of the variant (they change what is
  // in flight).
  int unit_modules = 1;
  bool prefetch_next = false;
  // A writer's own variant label (config.variant): part of the variant.
  std::string variant_name;
  // The launch the run was a rank of (config.parallelism.launch), where
  // its writer could tell: ranks of one data-parallel run share it.
  std::string launch;
};

RunIdentity identity_of(const Report& report);
RunIdentity identity_of(const CaseInfo& c, const RunConfig& config, const Producer& producer);

// No remedy, no sharding, the allocator's defaults: what remedies are
// measured against and verdicts are read from.
bool is_baseline_variant(const RunIdentity& id);
// The variant in the words flags use: "checkpoint=4+bf16", "zero1",
// "expandable_segments:True", joined with '+'; "none" for the baseline.
std::string variant_label(const RunIdentity& id);

enum class Aspect {
  kCase,
  kProducer,
  kDeviceKind,
  kDeviceIndex,
  kPreset,
  kBatch,
  kSteps,
  kSequence,  // a transformer's sequence length (none for an MLP)
  kSeed,
  kMemoryLimit,
  kVariant,  // remedies, sharded mode, allocator settings
  kWorld,    // world size and rank 0's extra samples
  kRank,
  kLaunch,   // the launch a rank belongs to (none where its writer could not tell)
};
const char* to_string(Aspect a);  // its one table of names

struct Projection {
  const char* name;     // "verdict_pool"
  const char* meaning;  // what two runs equal under it have in common, for docs and tests
  std::vector<Aspect> keeps;
  bool keeps_aspect(Aspect a) const;
};

// The questions, one projection each.
namespace projection {
// Runs a verdict reads together: one case on one kind of device, world and
// memory limit, by one producer. Preset, batch, steps and rank vary inside
// (sweeps and ranks); variants are measured against its baseline runs.
extern const Projection kVerdictPool;
// Runs --baseline pairs: everything but the device index.
extern const Projection kBaselineMatch;
// A variant's baseline run (a remedy table row): everything but the variant
// and the device index.
extern const Projection kVariantBaseline;
// A batch sweep and a capacity fit: the verdict pool's runs of one preset,
// steps, variant and rank, differing in the batch (and the seed, which
// changes values, not memory).
extern const Projection kBatchSweep;
// A parameters sweep: one variant and rank, any preset, batch and steps
// (optimizer state is per parameter, made once).
extern const Projection kParameterSweep;
// A steps sweep: one preset, batch, variant and rank, differing in steps.
extern const Projection kStepsSweep;
// A sequence sweep: one preset, batch, steps, variant and rank, differing
// in the sequence length (and the seed).
extern const Projection kSequenceSweep;
// The ranks of one data-parallel run: everything but the rank and the
// device index, and one launch where the reports say which.
extern const Projection kRankSet;
const std::vector<const Projection*>& all();
}  // namespace projection

// The aspects a projection keeps, spelt canonically and joined: equal keys
// mean equal under the projection.
std::string key(const Projection& p, const RunIdentity& id);
bool same(const Projection& p, const RunIdentity& a, const RunIdentity& b);
// "alpha, cuda, preset small, batch 4, ...": the kept aspects in words, for
// messages that name a configuration (the baseline gate's pairs).
std::string describe(const Projection& p, const RunIdentity& id);
// What differs between two runs under a projection, in words, each aspect
// "before -> after": "batch 16 -> batch 32, 6 steps -> 8 steps".
std::string differences(const Projection& p, const RunIdentity& before, const RunIdentity& after);

// The aspects (among those given) whose values differ between runs that
// share a case: what a sweep of planned runs varies, for its file names and
// progress lines. Linear in the number of runs.
std::vector<Aspect> varying_aspects(const std::vector<RunIdentity>& runs, const std::vector<Aspect>& among);

}  // namespace memdiag
