// Confirming runs: the memory_diagnostics invocations that would settle what
// the reports given cannot, as RunSpecs that run as printed. They name the
// case the way the report was made (a case file by its path), keep the
// group's configuration, and write beside the primary report under a name
// that clashes with no report given.
#include "confirm.hpp"
#include "evidence.hpp"
#include "capacity.hpp"
#include "step_capacity.hpp"

#include "memdiag/output_names.hpp"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <utility>

namespace memdiag::detail {
namespace {
namespace fs = std::filesystem;

// How much each step's peak rose from step 1 on (a least-squares slope;
// step 0 makes what is made once): a history the loop lengthens with
// torch.cat holds its old and new copies at once, so its peak climbs twice
// as fast as what each cleanup keeps (a hostile check's 16-step run peaked
// at 34.54 MiB where 26.55 was expected). Nothing with fewer than three
// steps past the first.
std::optional<double> peak_slope_mib(const RunFeatures& p) {
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const StepFigures& st : p.steps) {
    if (st.step < 1 || !(st.peak_mib > 0)) continue;
    const double x = st.step, y = st.peak_mib;
    n += 1, sx += x, sy += y, sxx += x * x, sxy += x * y;
  }
  const double den = n * sxx - sx * sx;
  if (n < 3 || !(den > 0)) return std::nullopt;
  return (n * sxy - sx * sy) / den;
}

// Reports written before case.presets existed do not say which presets the
// case has; the built-in cases ship these three.
const std::vector<std::string>& presets_of(const RunFeatures& p) {
  static const std::vector<std::string> shipped = {"small", "medium", "large"};
  static const std::vector<std::string> none;
  if (!p.case_presets.empty()) return p.case_presets;
  return p.case_builtin ? shipped : none;
}

// With gradient accumulation in a job of one's own the pair is of
// micro-batches, each run's batch as many of them as the report's steps
// ran (memory_diagnostics' confirming commands run without its remedies).
int confirming_micro_batches(const RunFeatures& p) {
  return p.id.producer == kProducerDiagnostics ? 1 : std::max(1, p.micro_batches);
}

class Planner {
 public:
  Planner(const Group& g, const RunFeatures& p, const std::set<std::string>& taken) : p_(p) {
    for (const std::string& t : taken) taken_.insert(normal_path(t));
    for (const RunFeatures& r : g.runs) taken_.insert(normal_path(r.source));
    base_.case_ref = p.case_builtin || p.case_source.empty() ? p.case_name : p.case_source;
    if (g.device_kind == "cpu") base_.device = "cpu";
    base_.preset = p.config.preset;
    // The configuration's steps: a batch sweep pools runs of equal steps.
    if (p.config.steps > 0) base_.steps = p.config.steps;
    if (p.config.seed != 0) base_.seed = p.config.seed;
    base_.memory_limit_mib = p.config.memory_limit_mib;
    base_.world_size = p.id.world_size;
    if (p.id.world_size > 1) {
      base_.rank_zero_extra_samples = p.id.rank_zero_extra_samples;
      base_.mode = p.id.mode;
      base_.unit_modules = p.id.unit_modules;
      base_.prefetch_next = p.id.prefetch_next;
    }
    dir_ = p.source == "-" ? std::string() : fs::path(p.source).parent_path().string();
  }

  ConfirmingRun batch(int b) {
    RunSpec r = base_;
    r.batch_size_per_device = b;
    ConfirmingRun c = made(SweepKind::kBatch, r, "batch" + std::to_string(b));
    c.micro_batches = confirming_micro_batches(p_);
    return c;
  }
  ConfirmingRun steps(int n) {
    RunSpec r = base_;
    r.steps = n;
    return made(SweepKind::kSteps, r, "steps" + std::to_string(n));
  }
  // The largest batch that fits the run's own budget, searched: what an
  // out-of-memory run cannot say. One process, so not for a launcher's
  // job; on the CPU only under a simulated limit (nothing else to search).
  std::optional<ConfirmingRun> largest_batch() {
    if (base_.world_size > 1 || (base_.device == "cpu" && !base_.memory_limit_mib)) return std::nullopt;
    // Out of memory before any batch: no batch fits, nothing to search.
    const std::optional<Phase> failed = p_.capacity_point.failed_phase;
    if (failed && is_setup_phase(*failed)) return std::nullopt;
    RunSpec r = base_;
    r.find_max_batch = true;
    return made(SweepKind::kBatch, r, "max-batch");
  }

  // The same run with the allocator's expandable segments: for an
  // out-of-memory run whose memory was there but in pieces, the cure
  // measured rather than a smaller batch.
  ConfirmingRun expandable_segments() {
    RunSpec r = base_;
    r.batch_size_per_device = static_cast<int>(p_.config.batch_size_per_device);
    r.remedies = {Remedy{RemedyKind::kExpandableSegments, 0}};
    return made(SweepKind::kBatch, r, "expandable-segments");
  }

  // Another preset of the case at batch 1 (the state is per parameter, not
  // per sample, and batch 1 keeps the larger model quick), if there is one.
  std::optional<ConfirmingRun> other_preset() {
    if (!runnable()) {
      // A job of one's own has no presets: a model of another size.
      RunSpec r = base_;
      r.preset.reset();
      r.batch_size_per_device = 1;
      return made(SweepKind::kParameters, r, "");
    }
    for (const std::string& name : cheapest_first()) {
      if (name == p_.config.preset) continue;
      RunSpec r = base_;
      r.preset = name;
      r.batch_size_per_device = 1;
      return made(SweepKind::kParameters, r, file_name_part(name) + "-batch1");
    }
    return std::nullopt;
  }

 private:
  bool runnable() const { return p_.id.producer == kProducerDiagnostics; }

  // The other presets, the smallest model first where the report gives
  // each preset's parameters (a preset the same size as the run's would not
  // show the state following the parameters, so it goes last); else as the
  // report lists them.
  std::vector<std::string> cheapest_first() const {
    std::vector<std::string> names = presets_of(p_);
    const auto& count = p_.case_preset_parameters;
    const auto own = count.find(p_.config.preset);
    if (own == count.end()) return names;
    auto key = [&](const std::string& n) {
      const auto it = count.find(n);
      const std::int64_t c = it == count.end() ? std::numeric_limits<std::int64_t>::max() : it->second;
      return std::make_pair(c == own->second, c);
    };
    std::stable_sort(names.begin(), names.end(),
                     [&](const std::string& a, const std::string& b) { return key(a) < key(b); });
    return names;
  }

  ConfirmingRun made(SweepKind kind, RunSpec r, const std::string& suffix) {
    ConfirmingRun c;
    c.confirms = kind;
    c.run = std::move(r);
    c.runnable = runnable();
    c.producer = p_.id.producer;
    if (c.runnable) c.run.output = output(suffix);
    return c;
  }

  std::string output(const std::string& suffix) {
    return unique_output(dir_, file_name_part(p_.case_name) + "-" + suffix, taken_,
                         base_.world_size > 1 ? "-{rank}" : "");
  }

  const RunFeatures& p_;
  std::set<std::string> taken_;
  RunSpec base_;
  std::string dir_;
};

// The expected cost of a confirming run, from the report it confirms (see
// ConfirmingRun). The steps' time scales with the batch above the report's
// (activations' work grows with the samples); below it a step's fixed work
// (the optimizer, the launches) does not shrink, so the report's own time
// bounds it.
// The batch pair that tells activations from the rest: 1 and 4, less the
// run's own batch (a job at batch 4 measured that point already), which
// 2 replaces.
std::vector<int> other_batches(const RunFeatures& p) {
  std::vector<int> out;
  const int k = confirming_micro_batches(p);
  const auto own = p.config.batch_size_per_device / k;
  for (int b : {1, 4}) out.push_back(k * (b == own ? 2 : b));
  std::sort(out.begin(), out.end());
  return out;
}

void estimate_cost(ConfirmingRun& c, const std::optional<CapacityFit>& fit, const RunFeatures& p) {
  const int steps = p.config.steps > 0 ? p.config.steps : static_cast<int>(p.steps.size());
  const double batch = static_cast<double>(std::max<std::int64_t>(p.local_batch, 1));
  const std::optional<double> ms = p.ms_per_step;
  switch (c.confirms) {
    case SweepKind::kBatch: {
      // A batch nobody saw (the report's 1 is a placeholder): neither the
      // peak nor the time scales from it.
      if (p.config.batch_assumed) return;
      // Rank 0 carries the extra samples and binds: its batch is the one
      // whose peak is said.
      const auto b = static_cast<double>(c.run.batch_size_per_device.value_or(0)) +
                     (c.run.world_size > 1 ? c.run.rank_zero_extra_samples : 0);
      if (b <= 0) return;
      if (fit) {
        // Allocated, as the report's peak is: what the allocator reserved
        // beyond its tensors at the largest run's peak does not carry to
        // another batch.
        c.expected_peak_mib = needed_mib(*fit, static_cast<std::int64_t>(b)) - fit->reserve_overhead_mib;
      }
      if (ms && steps > 0) {
        c.expected_seconds = *ms * steps * std::max(1.0, b / batch) / 1000.0;
        c.seconds_at_most = b < batch;
      }
      return;
    }
    case SweepKind::kSteps: {
      const int n = c.run.steps.value_or(0);
      if (n <= 0) return;
      // The peak climbs at the faster of what each cleanup keeps and what
      // the steps' own peaks show.
      const double climb = std::max({0.0, p.growth_per_step_mib.value_or(0), peak_slope_mib(p).value_or(0)});
      c.expected_peak_mib = p.peak_allocated_mib + climb * std::max(0, n - steps);
      if (ms) c.expected_seconds = *ms * n / 1000.0;
      return;
    }
    case SweepKind::kSequence:    // never suggested: a sweep of lengths is the user's
    case SweepKind::kParameters: return;  // another model: the report does not say
  }
}

}  // namespace

bool growth_unjudged(const RunFeatures& p) {
  return p.growth_significant && p.growth_per_step_mib && !p.steps.empty() &&
         p.steps.size() < static_cast<std::size_t>(thresholds::kMinGrowthSteps);
}

std::vector<ConfirmingRun> confirming_runs(const Decision& d, Cause cause, bool confirmed, const Group& g,
                                           const RunFeatures& p, const std::set<std::string>& taken) {
  Planner plan(g, p, taken);
  std::vector<ConfirmingRun> out;
  if (d.rule == DecisionRule::kOutOfMemory) {
    // Memory that was there in pieces (or cached): the allocator setting
    // that reuses it; otherwise what fits, searched.
    if (cause == Cause::kFragmentation || cause == Cause::kAllocatorCache) {
      out.push_back(plan.expandable_segments());
    } else if (auto r = plan.largest_batch()) {
      out.push_back(*r);
    }
    return out;
  }
  if (d.rule == DecisionRule::kNoCompletedStep) return out;
  if (d.rule == DecisionRule::kOneStepAmbiguous) {
    out.push_back(plan.steps(3));
    estimate_cost(out.back(), std::nullopt, p);
    return out;
  }
  const int longer = 2 * std::max(static_cast<int>(p.steps.size()), thresholds::kMinConfirmSteps);
  // Grown between its two cleanups: a leak or a one-off, which only more
  // steps tell (RoBERTa's logits kept in a dict read "activations" beside
  // "grows +16.00 MiB per step over 2 steps", nothing asked).
  const bool unjudged = cause != Cause::kRetainedGraph && growth_unjudged(p);
  if (confirmed) {
    if (unjudged) {
      out.push_back(plan.steps(longer));
      estimate_cost(out.back(), std::nullopt, p);
    }
    return out;
  }
  // A job of one's own whose steps varied in size: its own steps are a
  // sweep already; the runs that confirm it hold every step at a quarter
  // and at half of its largest, in the unit its memory follows (a token
  // budget, or a fixed batch), where the fit says what each should peak.
  const std::optional<StepSizeCapacity> sized =
      p.id.producer == kProducerDiagnostics ? std::nullopt : step_size_fit(p);
  auto size_runs = [&]() {
    for (std::int64_t n : {sized->most / 4, sized->most / 2}) {
      if (n < 1) continue;
      ConfirmingRun c = plan.batch(0);
      c.run.batch_size_per_device.reset();
      c.micro_batches = 1;
      c.step_size = n;
      c.step_size_in_tokens = sized->unit == StepSizeCapacity::Unit::kTokens;
      if (c.step_size_in_tokens && p.step_samples && !p.step_samples->varied()) c.step_sequences = p.step_samples->most;
      c.expected_peak_mib = sized->base_mib + sized->per_unit_mib * static_cast<double>(n);
      out.push_back(c);
    }
  };
  // A batch the group measured already, at the primary's preset (its
  // report was given beside this one, at these steps or others): not asked
  // for again (an independent check's detection sweep of batches 1, 2 and
  // 4 was told to record batches 1 and 2).
  const auto given = [&](int b) {
    return std::any_of(g.runs.begin(), g.runs.end(), [&](const RunFeatures& r) {
      return r.config.batch_size_per_device == b && r.config.preset == p.config.preset &&
             r.config.variant == p.config.variant && r.config.remedies.empty() == p.config.remedies.empty();
    });
  };
  switch (cause) {
    case Cause::kActivations:
      if (sized) {
        size_runs();
        break;
      }
      for (int b : other_batches(p)) {
        if (!given(b)) out.push_back(plan.batch(b));
      }
      break;
    case Cause::kOptimizerState:
      if (auto r = plan.other_preset()) out.push_back(*r);
      break;
    case Cause::kRetainedGraph:
      // A graph held whole from step to step (an evaluation's) grows with
      // no step: a longer run would show nothing; the response says the
      // change that frees it.
      if (bounded_hold(p)) break;
      out.push_back(plan.steps(longer));
      break;
    case Cause::kInconclusive: {
      // The runs at other batches (or sizes); with skip_given, none the
      // group measured already (their reports were given beside this one).
      const auto batch_runs = [&](bool skip_given) {
        if (sized) {
          size_runs();
          return;
        }
        for (int b : other_batches(p)) {
          if (!(skip_given && given(b))) out.push_back(plan.batch(b));
        }
      };
      // The one run that tells the two tied consumers apart
      // (tied_pair_test; the response says it in words).
      switch (tied_pair_test(d)) {
        case TiedPairTest::kExpandableSegments: out.push_back(plan.expandable_segments()); break;
        case TiedPairTest::kLongerRun: out.push_back(plan.steps(longer)); break;
        case TiedPairTest::kSmallerBatch: batch_runs(true); break;
        case TiedPairTest::kModelState: break;  // no run tells them apart; the response divides both
        case TiedPairTest::kNone:
          batch_runs(false);
          out.push_back(plan.steps(longer));
          break;
      }
      break;
    }
    case Cause::kParameters:
    case Cause::kAllocatorCache:
    case Cause::kFragmentation: break;
  }
  if (unjudged && std::none_of(out.begin(), out.end(), [](const ConfirmingRun& c) { return c.confirms == SweepKind::kSteps; })) {
    out.push_back(plan.steps(longer));
  }
  // One fit for all of them: the group's runs of the configuration.
  const std::optional<CapacityFit> fit =
      out.empty() || p.config.batch_assumed ? std::nullopt : fit_capacity(batch_points(g, p));
  for (ConfirmingRun& c : out) {
    if (!c.step_size) estimate_cost(c, fit, p);
  }
  return out;
}

}  // namespace memdiag::detail

namespace memdiag {

TiedPairTest tied_pair_test(const Decision& d) {
  if (d.rule != DecisionRule::kTooClose || !d.top || !d.runner_up) return TiedPairTest::kNone;
  const auto either = [&](Cause c) { return d.top->cause == c || d.runner_up->cause == c; };
  // Memory the allocator holds beside the tensors shrinks under expandable
  // segments; what the tensors hold does not.
  if (either(Cause::kAllocatorCache) || either(Cause::kFragmentation)) return TiedPairTest::kExpandableSegments;
  // A retained graph adds to the post-cleanup allocation at every step;
  // nothing else grows with the steps. Not one held and bounded: a longer
  // run shows nothing more of it.
  if (either(Cause::kRetainedGraph) && !d.retained_bounded) return TiedPairTest::kLongerRun;
  // Activations follow the batch; the model's state does not.
  if (either(Cause::kActivations)) return TiedPairTest::kSmallerBatch;
  // Weights and the optimizer's state: both per parameter.
  if (either(Cause::kParameters) && either(Cause::kOptimizerState)) return TiedPairTest::kModelState;
  return TiedPairTest::kNone;
}

}  // namespace memdiag
