// --find-max-batch: the largest batch that completes its steps within a
// budget. Tries run in this process, each from what a fresh process holds
// (the sweeps' reset between runs): one sample first, then where the
// capacity model over the tries so far puts the answer, kept inside the
// bracket until it closes to a gap of one sample (search_guide.hpp). A batch finder's
// answer often fails when the job is started afresh (Lightning #8028), so the
// answer is then run again in fresh processes: max_batch must complete and
// max_batch + 1 must run out.
#include "memdiag/atomic_file.hpp"
#include "memdiag/capacity_model.hpp"
#include "memdiag/errors.hpp"
#include "memdiag/exit_cleanup.hpp"
#include "memdiag/format.hpp"
#include "memdiag/limits.hpp"
#include "memdiag/probes.hpp"
#include "memdiag/output_guard.hpp"
#include "memdiag/report_json.hpp"
#include "memdiag/report_reader.hpp"
#include "memdiag/search_guide.hpp"
#include "memdiag/sweep_plan.hpp"
#include "run_plan.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace memdiag::detail {

namespace {

struct Budget {
  double limit_mib = 0;
  CapacitySearch::LimitSource source = CapacitySearch::LimitSource::kMemoryLimit;
};

// --memory-limit-mib, or on CUDA what the device leaves to the allocator:
// its capacity less what is held outside it now (the CUDA context, other
// processes), the budget compare_memory_reports predicts against too.
Budget budget_for(const ResolvedPlan& plan, const HarnessOptions& opts, MemoryProbe& probe) {
  if (opts.memory_limit_mib) return {*opts.memory_limit_mib, CapacitySearch::LimitSource::kMemoryLimit};
  const ProbeReading r = probe.read();
  const double total = cuda_device_info(plan.device.index()).total_mib;
  const double outside = r.device_used_mib.value_or(0) - r.reserved_mib.value_or(0);
  return {total - outside, CapacitySearch::LimitSource::kDevice};
}

// The capacity model over the tries (the fit compare_memory_reports makes
// of the same points), without the tries' own outcomes: what the lines
// predict, to set beside what the search found.
void predict(CapacitySearch& c) {
  const std::optional<CapacityFit> fit = fit_capacity(capacity_points(c, ""));
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
std::optional<double> held_by_this_process(const ResolvedPlan& plan, MemoryProbe& probe) {
  if (!plan.device.is_cuda()) return std::nullopt;
  probe.reset_between_runs();
  return probe.read().process_device_mib;
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

// Runs batch B and B + 1 in fresh processes. Returns the fresh run of B
// (when it completed) for the report, and whether both agreed.
struct Confirmation {
  std::optional<Report> fits;  // the fresh run of max_batch, when it completed
  bool agreed = false;
};

Confirmation confirm(const PlannedRun& base, const ResolvedPlan& plan, const HarnessOptions& opts,
                     const CapacitySearch& c, RunObserver& obs) {
  Confirmation out;
  // POSIX calls, not std::filesystem: libtorch.so exports its own copy of
  // std::filesystem::remove_all, which crashes when it is bound instead of
  // libstdc++'s (seen with torch 2.11).
  const char* tmp = std::getenv("TMPDIR");
  std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/memdiag-max-batch-XXXXXX";
  if (::mkdtemp(templ.data()) == nullptr) {
    throw Error("--find-max-batch: cannot make a directory for the confirming runs in " + templ + ": " +
                std::strerror(errno));
  }
  const std::string dir = templ;
  // A second signal ends this process at once: the folder goes with it.
  CleanupPath cleanup(dir, CleanupPath::Kind::kDirectory);
  std::vector<std::string> written;
  auto fresh = [&](std::int64_t batch) -> std::optional<Report> {
    PlannedRun run = base;
    run.batch = static_cast<int>(batch);
    const std::string path = dir + "/batch" + std::to_string(batch) + ".json";
    written.push_back(path);
    run_child(child_argv(run, plan, opts, path), opts.stop, /*silent=*/true);
    ReadResult r = read_report_file(path);
    obs.search_confirming(batch, r.report ? std::optional<RunStatus>(r.report->status) : std::nullopt);
    return r.report;
  };
  bool agreed = true;
  if (c.max_batch >= 1) {
    std::optional<Report> r = fresh(c.max_batch);
    agreed = r && r->status == RunStatus::kComplete;
    if (agreed) out.fits = std::move(r);
  }
  if (agreed && c.first_failing_batch) {
    // The first batch that ran out: max_batch + 1, or, when nothing fitted,
    // the search's first try (K samples under accumulate=K, where fewer
    // would be refused rather than run out).
    const std::optional<Report> r = fresh(*c.first_failing_batch);
    agreed = r && r->status == RunStatus::kOom;
  }
  out.agreed = agreed;
  for (const std::string& f : written) ::unlink(f.c_str());
  ::rmdir(dir.c_str());
  return out;
}

// One search: its tries in this process, then the answer confirmed in
// fresh processes and written with the search in its report.
class Search {
 public:
  Search(const ResolvedPlan& plan, const HarnessOptions& opts, Session& session, RunObserver& obs)
      : plan_(plan), opts_(opts), session_(session), obs_(obs), base_(plan.runs.front()) {
    const Budget b = budget_for(plan, opts, *session.probe);
    c_.limit_mib = b.limit_mib;
    c_.limit_source = b.source;
    // Gradient accumulation over K micro-batches needs K samples: its
    // search starts at K (and max_batch 0 then means not even K fit).
    const auto acc = find_remedy(base_.remedies, RemedyKind::kAccumulate);
    first_ = acc ? std::max<std::int64_t>(1, acc->param) : 1;
  }

  int run() {
    obs_.search_started(SearchHeading{base_.spec.name, base_.preset, plan_.device.str(), base_.steps, c_.limit_mib,
                                      c_.limit_source});
    // The first try, then where the capacity model over the tries so far
    // says the answer is, until the bracket closes (search_guide.hpp).
    for (std::optional<std::int64_t> b = first_; b && attempt(*b);) {
      b = next_search_batch(c_, SearchBracket{lo_, hi_}, limits::kMaxBatch,
                            plan_.device.is_cuda() ? std::nullopt : std::optional<std::int64_t>(16));
    }
    c_.max_batch = lo_;
    c_.first_failing_batch = hi_;
    predict(c_);
    RunLabel label = base_.label;
    label.batch = static_cast<int>(std::max<std::int64_t>(1, lo_));
    output_ = opts_.output.empty() ? base_.output : expand_output(opts_.output, label);
    // A name made from the batch found: what is there now is what the
    // write may replace (the checks looked at the base's name).
    if (output_ != base_.output) remember_output(output_);
    return stopped_ != RunStatus::kComplete ? keep_what_was_found() : confirm_and_write();
  }

 private:
  // One try from what a fresh process holds; false once the search stops.
  bool attempt(std::int64_t batch) {
    if (!c_.tries.empty()) session_.probe->reset_between_runs();
    PlannedRun run = base_;
    run.batch = static_cast<int>(batch);
    const auto t0 = std::chrono::steady_clock::now();
    Report report = run_configuration(run, plan_, opts_, session_, obs_);
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

  static CapacityTry try_of(const Report& report, std::int64_t batch, double seconds) {
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

  bool write(Report report) {
    report.capacity = c_;
    try {
      const GuardedWrite written = write_own_report(output_, report);
      if (!written.refused.empty()) {
        // Another run wrote there meanwhile: both reports stay.
        obs_.problem(detail::kept_beside_line(output_, written));
        output_ = written.kept_at;
        kept_beside_ = true;
      }
      return true;
    } catch (const std::exception& e) {
      obs_.problem(std::string("--output: ") + e.what());
      return false;
    }
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
    const std::optional<double> outside = held_by_this_process(plan_, *session_.probe);
    if (c_.limit_source == CapacitySearch::LimitSource::kMemoryLimit &&
        (!outside || !plan_.device.is_cuda() ||
         c_.limit_mib + *outside <= cuda_device_info(plan_.device.index()).total_mib)) {
      conf = confirm(base_, plan_, opts_, c_, obs_);
      // Interrupted meanwhile: the children were stopped, which says nothing
      // about whether they fit. Not checked, and the search ends interrupted.
      interrupted = opts_.stop != nullptr && opts_.stop->requested();
      if (interrupted) {
        conf = Confirmation{};
      } else {
        c_.confirmed = conf.agreed;
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
  Session& session_;
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

int run_max_batch_search(const ResolvedPlan& plan, const HarnessOptions& opts, Session& session, RunObserver& obs) {
  return Search(plan, opts, session, obs).run();
}

}  // namespace memdiag::detail
