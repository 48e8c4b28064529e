// --find-max-batch: the largest batch that completes its steps within a
// budget. Tries run through the executor, each from what a fresh process
// holds (the sweeps' reset between runs), sharing their model's first
// build. One sample first; then, under a memory
// limit, one traced try where the lines through it put a quarter of the
// answer, whose replay (replay_capacity.hpp) names the answer; fresh
// processes run it and the batch above it side by side, and where they
// agree the search is done. Otherwise, or where the replay cannot answer,
// tries go where the capacity model over the tries so far puts the answer,
// kept inside the bracket until it closes to a gap of one sample
// (search_guide.hpp), and fresh processes check that. A batch finder's
// answer often fails when the job is started afresh (Lightning #8028):
// max_batch must complete and max_batch + 1 must run out in them.
#include "memdiag/max_batch.hpp"

#include "memdiag/capacity_model.hpp"
#include "memdiag/exit_code.hpp"
#include "memdiag/limits.hpp"
#include "memdiag/output_guard.hpp"
#include "memdiag/own_report.hpp"
#include "memdiag/replay_capacity.hpp"
#include "memdiag/search_guide.hpp"
#include "memdiag/sweep_row.hpp"

#include <algorithm>
#include <chrono>

namespace memdiag {

namespace {

struct Budget {
  double limit_mib = 0;
  CapacitySearch::LimitSource source = CapacitySearch::LimitSource::kMemoryLimit;
};

// --memory-limit-mib, or on CUDA what the device leaves to the allocator:
// its capacity less what is held outside it now (the CUDA context, other
// processes), the budget compare_memory_reports predicts against too.
Budget budget_for(const HarnessOptions& opts, Executor& executor) {
  if (opts.memory_limit_mib) return {*opts.memory_limit_mib, CapacitySearch::LimitSource::kMemoryLimit};
  const ProbeReading r = executor.read_probe();
  const double total = executor.device_total_mib();
  const double outside = r.device_used_mib.value_or(0) - r.reserved_mib.value_or(0);
  return {total - outside, CapacitySearch::LimitSource::kDevice};
}

// The capacity model over the tries (the fit compare_memory_reports makes
// of the same points), without the tries' own outcomes: what the lines
// predict, to set beside what the search found.
// answer_run: the report of the fresh process that ran the answer, which
// the fit takes where the search never tried that batch itself.
void predict(CapacitySearch& c, const Report* answer_run = nullptr) {
  std::optional<CapacityPoint> answer;
  if (answer_run != nullptr) answer = capacity_point(*answer_run, c.max_batch, "");
  const std::optional<CapacityFit> fit = fit_capacity(search_capacity_points(c, answer, ""));
  if (!fit) return;
  const CapacityAnswer a = predict_max_batch(*fit, c.limit_mib, /*apply_bounds=*/false);
  c.predicted_max_batch = a.max_batch;
  c.fit_fixed_mib = a.binding.fixed_mib;
  c.fit_per_sample_mib = a.binding.per_sample_mib;
  c.binding_phase = a.binding.phase;
}

// What this process holds on the device beyond the caching allocator's
// cache (its CUDA context, library workspaces): NVML's figure for the
// process, else nothing known.
std::optional<double> held_by_this_process(const ResolvedPlan& plan, Executor& executor) {
  if (!plan.device.is_cuda()) return std::nullopt;
  executor.reset_between_runs();
  return executor.read_probe().process_device_mib;
}

const char* status_word(RunStatus s) {
  switch (s) {
    case RunStatus::kComplete: return "fits";
    case RunStatus::kOom: return "out of memory";
    case RunStatus::kInterrupted: return "interrupted";
    case RunStatus::kFailed: return "failed";
  }
  return nullptr;  // past the last value: all_values() stops here
}

// A run as the search records it: how it ended, its phases for the
// capacity model, and for one that ran out what it held and asked for.
CapacityTry try_of(const Report& report, std::int64_t batch, double seconds) {
  CapacityTry t;
  t.batch = batch;
  t.status = report.status;
  t.peak_allocated_mib = run_peak(report);
  t.seconds = seconds;
  const CapacityPoint point = capacity_point(report, batch, "");
  t.phases = point.phases;
  t.reserve_overhead_mib = point.reserve_overhead_mib;
  t.persistent_other_mib = point.persistent_other_mib;
  t.failed_phase = point.failed_phase;
  t.needed_mib = point.needed_mib;
  return t;
}

// Runs batch B and B + 1 in fresh processes. Returns the fresh run of B
// (when it completed) for the report, and whether both agreed.
struct Confirmation {
  std::optional<Report> fits;  // the fresh run of max_batch, when it completed
  bool agreed = false;
  // How each ended, where it ran (a disagreement moves the bracket), and
  // the batch above's run where it completed.
  std::optional<RunStatus> at_max, above;
  std::optional<Report> above_report;
  // Both fresh runs as the report records them (CapacitySearch::checks).
  std::vector<CapacityTry> checks;
};

std::optional<RunStatus> status_of(const std::optional<Report>& r) {
  return r ? std::optional<RunStatus>(r->status) : std::nullopt;
}

// The search's first batch: one sample, or K under gradient accumulation
// over K micro-batches, which needs K (max_batch 0 then means not even K
// fit).
std::int64_t first_try_batch(const PlannedRun& base) {
  const auto acc = find_remedy(base.remedies, RemedyKind::kAccumulate);
  return acc ? std::max<std::int64_t>(1, acc->param) : 1;
}

// Under a limit the answer is checked in fresh processes, two side by
// side: they are started before this process opens its session, to make
// their process, context and model while this one does the same and runs
// its tries, and wait for their batch (FreshProcesses::prepare). On CUDA
// only where the device has room for this process's limit and two waiting
// processes beside two limits, each process's own memory taken as
// kProcessOwnMib until one is measured.
void prepare_confirmations(const ResolvedPlan& plan, const HarnessOptions& opts, Executor& executor,
                           FreshProcesses& fresh) {
  if (!opts.memory_limit_mib || (opts.stop != nullptr && opts.stop->requested())) return;
  constexpr double kProcessOwnMib = 1024;  // the H200's context and workspaces: about 750
  if (plan.device.is_cuda() && 3 * *opts.memory_limit_mib + 3 * kProcessOwnMib > executor.device_total_mib()) return;
  PlannedRun run = plan.runs.front();
  run.batch = static_cast<int>(first_try_batch(run));
  fresh.prepare(run, plan, opts, 2);
}

Confirmation confirm(const PlannedRun& base, const ResolvedPlan& plan, const HarnessOptions& opts,
                     const CapacitySearch& c, RunObserver& obs, FreshProcesses& fresh, bool parallel) {
  Confirmation out;
  auto at = [&](std::int64_t batch) {
    PlannedRun run = base;
    run.batch = static_cast<int>(batch);
    return run;
  };
  auto said = [&](std::int64_t batch, std::optional<Report> r) {
    obs.search_confirming(batch, status_of(r));
    if (r) {
      double ms = 0;
      for (const Sample& x : r->samples) ms += x.elapsed_ms;
      out.checks.push_back(try_of(*r, batch, ms / 1000.0));
    }
    return r;
  };
  // The first batch that ran out: max_batch + 1, or, when nothing fitted,
  // the search's first try (K samples under accumulate=K, where fewer
  // would be refused rather than run out).
  const std::optional<std::int64_t> above = c.first_failing_batch;
  bool agreed = true;
  if (c.max_batch >= 1 && above && parallel) {
    std::vector<std::optional<Report>> both = fresh.run({at(c.max_batch), at(*above)}, plan, opts);
    std::optional<Report> r = said(c.max_batch, std::move(both[0]));
    const std::optional<Report> a = said(*above, std::move(both[1]));
    agreed = r && r->status == RunStatus::kComplete && a && a->status == RunStatus::kOom;
    out.at_max = status_of(r);
    out.above = status_of(a);
    if (r && r->status == RunStatus::kComplete) out.fits = std::move(r);
    if (a && a->status == RunStatus::kComplete) out.above_report = a;
  } else {
    if (c.max_batch >= 1) {
      std::optional<Report> r = said(c.max_batch, std::move(fresh.run({at(c.max_batch)}, plan, opts).front()));
      agreed = r && r->status == RunStatus::kComplete;
      out.at_max = status_of(r);
      if (agreed) out.fits = std::move(r);
    }
    if (agreed && above) {
      const std::optional<Report> r = said(*above, std::move(fresh.run({at(*above)}, plan, opts).front()));
      agreed = r && r->status == RunStatus::kOom;
      out.above = status_of(r);
    }
  }
  out.agreed = agreed;
  return out;
}

// One search: its tries in this process, then the answer confirmed in
// fresh processes and written with the search in its report.
class Search {
 public:
  Search(const ResolvedPlan& plan, const HarnessOptions& opts, Executor& executor, FreshProcesses& fresh,
         RunObserver& obs)
      : plan_(plan), opts_(opts), executor_(executor), fresh_(fresh), obs_(obs), base_(plan.runs.front()) {
    const Budget b = budget_for(opts, executor);
    c_.limit_mib = b.limit_mib;
    c_.limit_source = b.source;
    first_ = first_try_batch(base_);
    executor_.share_model_builds(true);
  }
  ~Search() { executor_.share_model_builds(false); }
  Search(const Search&) = delete;
  Search& operator=(const Search&) = delete;

  int run() {
    obs_.search_started(SearchHeading{base_.spec.name, base_.preset, plan_.device.str(), base_.steps, c_.limit_mib,
                                      c_.limit_source});
    // The first try; under a limit, the replay's answer checked in fresh
    // processes; else where the capacity model over the tries so far says
    // the answer is, until the bracket closes (search_guide.hpp).
    if (attempt(first_) && lo_ == first_ && !hi_ && replay_settles()) return confirmed_by_replay();
    for (std::optional<std::int64_t> b = next(); b && stopped_ == RunStatus::kComplete && attempt(*b);) b = next();
    c_.max_batch = lo_;
    c_.first_failing_batch = hi_;
    predict(c_);
    name_output();
    return stopped_ != RunStatus::kComplete ? keep_what_was_found() : confirm_and_write();
  }

 private:
  std::optional<std::int64_t> next() const {
    if (hi_ && *hi_ - lo_ <= 1) return std::nullopt;
    return next_search_batch(c_, SearchBracket{lo_, hi_}, limits::kMaxBatch,
                             plan_.device.is_cuda() ? std::nullopt : std::optional<std::int64_t>(16));
  }

  void name_output() {
    RunLabel label = base_.label;
    label.batch = static_cast<int>(std::max<std::int64_t>(1, lo_));
    output_ = opts_.output.empty() ? base_.output : expand_output(opts_.output, label);
    // A name made from the batch found: what is there now is what the
    // write may replace (the checks looked at the base's name).
    if (output_ != base_.output) remember_output(output_);
  }

  // Fresh processes can run side by side: on the CPU, and on CUDA where
  // the device has room for two limits and three processes' own memory
  // beside them (this one's, NVML's figure, stands for each).
  bool side_by_side(std::optional<double> outside) const {
    if (!plan_.device.is_cuda()) return true;
    return outside && 2 * c_.limit_mib + 3 * *outside <= executor_.device_total_mib();
  }

  // A traced try where the lines through the tries so far put a quarter of
  // the answer, replayed at the limit: true when fresh processes then
  // agree with its answer (c_ and best_ hold it), false to search on.
  bool replay_settles() {
    if (c_.limit_source != CapacitySearch::LimitSource::kMemoryLimit || !executor_.limit_bytes() ||
        has_process_scope(base_.remedies) || (opts_.stop != nullptr && opts_.stop->requested())) {
      return false;
    }
    const std::optional<CapacityFit> fit = fit_capacity(capacity_points(c_, ""));
    if (!fit) return false;
    const std::int64_t lines = predict_max_batch(*fit, c_.limit_mib, false).max_batch;
    // On the CPU, where a try's time grows with its batch, no further than
    // the guided search goes in one try (16 times the largest that fitted).
    std::int64_t traced = std::max<std::int64_t>(2 * first_, lines / 4);
    if (!plan_.device.is_cuda()) traced = std::min(traced, std::max<std::int64_t>(2 * first_, 16 * lo_));
    if (traced >= lines) return false;
    HarnessOptions traced_opts = opts_;
    traced_opts.trace_allocations = true;
    std::optional<Report> report;
    if (!attempt(traced, &traced_opts, &report) || !report || report->status != RunStatus::kComplete ||
        !report->allocation_trace || !replay_disagreement(*report->allocation_trace).empty()) {
      return false;
    }
    const std::optional<ScaledTrace> t = scale_trace(*report->allocation_trace);
    if (!t) return false;
    const ReplayCapacity r = replay_capacity(*t, c_.limit_mib, *executor_.limit_bytes());
    if (r.max_batch <= lo_ || r.max_batch >= limits::kMaxBatch || (hi_ && r.max_batch >= *hi_)) return false;
    c_.replayed_max_batch = r.max_batch;
    // The replay's answer and the batch above it, as a search's answer,
    // checked as one.
    c_.max_batch = r.max_batch;
    c_.first_failing_batch = r.max_batch + 1;
    const std::optional<double> outside = held_by_this_process(plan_, executor_);
    if (plan_.device.is_cuda() && (!outside || c_.limit_mib + *outside > executor_.device_total_mib())) {
      return false;
    }
    Confirmation conf = confirm(base_, plan_, opts_, c_, obs_, fresh_, side_by_side(outside));
    if (opts_.stop != nullptr && opts_.stop->requested()) {
      stopped_ = RunStatus::kInterrupted;
      return false;
    }
    // What the fresh runs measured moves the bracket either way.
    if (conf.at_max == RunStatus::kComplete) lo_ = std::max(lo_, r.max_batch);
    if (conf.at_max == RunStatus::kOom) hi_ = std::min(hi_.value_or(r.max_batch), r.max_batch);
    if (conf.above == RunStatus::kComplete) lo_ = std::max(lo_, r.max_batch + 1);
    if (conf.above == RunStatus::kOom) hi_ = std::min(hi_.value_or(r.max_batch + 1), r.max_batch + 1);
    if (conf.fits) best_ = std::move(conf.fits);
    if (conf.above_report) best_ = std::move(conf.above_report);
    c_.max_batch = 0;
    c_.first_failing_batch.reset();
    if (!conf.agreed) return false;
    c_.confirmed = true;
    c_.checks = std::move(conf.checks);
    return true;
  }

  int confirmed_by_replay() {
    c_.max_batch = lo_;
    c_.first_failing_batch = hi_;
    predict(c_, best_ ? &*best_ : nullptr);
    name_output();
    if (!write(std::move(*best_))) return to_int(ExitCode::kFailed);
    obs_.search_finished(c_, output_);
    return to_int(ExitCode::kOk);
  }

  // One try from what a fresh process holds; false once the search stops.
  bool attempt(std::int64_t batch, const HarnessOptions* with = nullptr, std::optional<Report>* kept = nullptr) {
    fresh_.settle();  // fresh processes of a check still ending hold the device's memory
    if (!c_.tries.empty()) executor_.reset_between_runs();
    PlannedRun run = base_;
    run.batch = static_cast<int>(batch);
    const auto t0 = std::chrono::steady_clock::now();
    Report report = executor_.run(run, plan_, with != nullptr ? *with : opts_, obs_, /*live=*/false);
    if (kept != nullptr) *kept = report;
    c_.tries.push_back(try_of(report, batch, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()));
    obs_.search_tried(c_.tries.back(), c_.tries.size());
    switch (report.status) {
      case RunStatus::kComplete:
        lo_ = batch;
        best_ = std::move(report);
        break;
      case RunStatus::kOom:
        hi_ = std::min(hi_.value_or(batch), batch);
        if (batch == first_) failed_ = std::move(report);
        break;
      case RunStatus::kInterrupted:
      case RunStatus::kFailed:
        stopped_ = report.status;
        stopped_report_ = std::move(report);
        break;
    }
    // A try that ran out of memory does not look at the stop request; the
    // search does, after every try.
    if (stopped_ == RunStatus::kComplete && opts_.stop != nullptr && opts_.stop->requested()) {
      stopped_ = RunStatus::kInterrupted;
    }
    return stopped_ == RunStatus::kComplete;
  }


  bool write(Report report) {
    report.capacity = c_;
    const OwnReportWritten written = write_run_report(output_, report, obs_);
    if (!written.ok) return false;
    // Another run wrote there meanwhile: both reports stay.
    output_ = written.at;
    kept_beside_ = kept_beside_ || written.kept_beside;
    return true;
  }

  // A search that stopped keeps the largest batch that fitted so far, not
  // confirmed, with a note saying it did not finish.
  // Stopped before anything fitted (in its first try, say), the report is
  // the try that stopped, marked as it ended: a run interrupted writes its
  // report, a search too.
  int keep_what_was_found() {
    std::optional<Report>& kept = best_ ? best_ : stopped_report_ ? stopped_report_ : failed_;
    if (kept) {
      kept->events.push_back(make_event(EventKind::kNote, std::nullopt, std::nullopt,
                                        "--find-max-batch stopped at try " + std::to_string(c_.tries.size()) + " (" +
                                            status_word(stopped_) + "): max_batch is the largest that fitted so far"));
    }
    const bool written = kept && write(std::move(*kept));
    obs_.problem("--find-max-batch: the search stopped (try " + std::to_string(c_.tries.size()) + " " +
                 status_word(stopped_) + "); " +
                 (written && lo_ > 0 ? "the largest batch that fitted so far (" + std::to_string(lo_) + ") is in " + output_
                 : written ? "no batch fitted before it stopped; the try that stopped is in " + output_
                          : std::string("nothing written")));
    return to_int(stopped_ == RunStatus::kInterrupted ? ExitCode::kInterrupted
                  : kept_beside_                        ? ExitCode::kUsage
                                                        : ExitCode::kFailed);
  }

  // A fresh process shares the device with this one, whose CUDA context and
  // workspaces stay until it exits: against the whole device that is a
  // smaller budget, and on the H200 the fresh run of the answer failed for
  // it (alpha small, 2197504 samples). The check is made only under a limit
  // that leaves room for both.
  int confirm_and_write() {
    Confirmation conf;
    bool interrupted = false;
    const std::optional<double> outside = held_by_this_process(plan_, executor_);
    if (c_.limit_source == CapacitySearch::LimitSource::kMemoryLimit &&
        (!outside || !plan_.device.is_cuda() || c_.limit_mib + *outside <= executor_.device_total_mib())) {
      conf = confirm(base_, plan_, opts_, c_, obs_, fresh_, side_by_side(outside));
      // Interrupted meanwhile: the children were stopped, which says nothing
      // about whether they fit. Not checked, and the search ends interrupted.
      interrupted = opts_.stop != nullptr && opts_.stop->requested();
      if (interrupted) {
        conf = Confirmation{};
      } else {
        c_.confirmed = conf.agreed;
        if (conf.agreed) c_.checks = std::move(conf.checks);
      }
    } else {
      obs_.search_confirmation_skipped(outside, c_.limit_mib, c_.max_batch);
    }
    // The report a user running max_batch afresh gets, with the search in it.
    if (!write(conf.fits ? std::move(*conf.fits) : best_ ? std::move(*best_) : std::move(*failed_))) {
      return to_int(ExitCode::kFailed);
    }
    obs_.search_finished(c_, output_);
    if (interrupted) return to_int(ExitCode::kInterrupted);
    if (kept_beside_) return to_int(ExitCode::kUsage);
    return to_int(lo_ == 0 ? ExitCode::kOom : ExitCode::kOk);
  }

  const ResolvedPlan& plan_;
  const HarnessOptions& opts_;
  Executor& executor_;
  FreshProcesses& fresh_;
  RunObserver& obs_;
  const PlannedRun& base_;
  CapacitySearch c_;
  std::int64_t first_ = 1;
  std::int64_t lo_ = 0;                  // largest batch that completed
  std::optional<std::int64_t> hi_;       // smallest that ran out
  std::optional<Report> best_;           // the largest batch's run
  std::optional<Report> failed_;         // the first batch's run, when even that ran out
  std::optional<Report> stopped_report_; // the try that was interrupted or failed
  RunStatus stopped_ = RunStatus::kComplete;
  std::string output_;
  bool kept_beside_ = false;  // another run wrote output_ meanwhile; this report went beside it
};

}  // namespace

int run_max_batch_search(const ResolvedPlan& plan, const HarnessOptions& opts, Executor& executor,
                         FreshProcesses& fresh, RunObserver& obs) {
  prepare_confirmations(plan, opts, executor, fresh);
  if (const std::optional<int> failed = executor.open_session(plan, opts, obs)) return *failed;
  return Search(plan, opts, executor, fresh, obs).run();
}

}  // namespace memdiag
