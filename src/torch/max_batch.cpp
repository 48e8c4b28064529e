// --find-max-batch: the largest batch that completes its steps within a
// budget. Tries run in this process, each from what a fresh process holds
// (the sweeps' reset between runs), doubling from one sample to the first
// out-of-memory and then bisecting to a gap of one sample. A batch finder's
// answer often fails when the job is started afresh (Lightning #8028), so the
// answer is then run again in fresh processes: max_batch must complete and
// max_batch + 1 must run out.
#include "memdiag/atomic_file.hpp"
#include "memdiag/capacity_model.hpp"
#include "memdiag/errors.hpp"
#include "memdiag/format.hpp"
#include "memdiag/limits.hpp"
#include "memdiag/probes.hpp"
#include "memdiag/report_json.hpp"
#include "memdiag/report_reader.hpp"
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
    const std::optional<Report> r = fresh(c.max_batch + 1);
    agreed = r && r->status == RunStatus::kOom;
  }
  out.agreed = agreed;
  for (const std::string& f : written) ::unlink(f.c_str());
  ::rmdir(dir.c_str());
  return out;
}

}  // namespace

int run_max_batch_search(const ResolvedPlan& plan, const HarnessOptions& opts, Session& session, RunObserver& obs) {
  const PlannedRun& base = plan.runs.front();
  CapacitySearch c;
  {
    const Budget b = budget_for(plan, opts, *session.probe);
    c.limit_mib = b.limit_mib;
    c.limit_source = b.source;
  }
  obs.search_started(SearchHeading{base.spec.name, base.preset, plan.device.str(), base.steps, c.limit_mib, c.limit_source});

  std::optional<Report> best;    // the largest batch that completed
  std::optional<Report> failed;  // batch 1's run, when even that ran out
  std::int64_t lo = 0;           // largest batch that completed
  std::optional<std::int64_t> hi;  // smallest that ran out
  RunStatus stopped = RunStatus::kComplete;
  // Gradient accumulation over K micro-batches needs K samples: its search
  // starts at K (and max_batch 0 then means not even K fit).
  const auto acc = find_remedy(base.remedies, RemedyKind::kAccumulate);
  const std::int64_t first = acc ? std::max<std::int64_t>(1, acc->param) : 1;
  auto attempt = [&](std::int64_t batch) {
    if (!c.tries.empty()) session.probe->reset_between_runs();
    PlannedRun run = base;
    run.batch = static_cast<int>(batch);
    const auto t0 = std::chrono::steady_clock::now();
    Report report = run_configuration(run, plan, opts, session, obs);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
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
    c.tries.push_back(std::move(t));
    obs.search_tried(c.tries.back(), c.tries.size());

    switch (report.status) {
      case RunStatus::kComplete:
        lo = batch;
        best = std::move(report);
        break;
      case RunStatus::kOom:
        hi = std::min(hi.value_or(batch), batch);
        if (batch == first) failed = std::move(report);
        break;
      case RunStatus::kInterrupted:
      case RunStatus::kFailed: stopped = report.status; break;
    }
    // A try that ran out of memory does not look at the stop request; the
    // search does, after every try.
    if (stopped == RunStatus::kComplete && opts.stop != nullptr && opts.stop->requested()) {
      stopped = RunStatus::kInterrupted;
    }
    return stopped == RunStatus::kComplete;
  };
  // Doubling, then bisection to a gap of one sample.
  for (std::int64_t b = first; !hi && attempt(b) && lo < limits::kMaxBatch;) b = std::min(2 * b, limits::kMaxBatch);
  while (stopped == RunStatus::kComplete && hi && lo > 0 && *hi - lo > 1) attempt(lo + (*hi - lo) / 2);
  c.max_batch = lo;
  c.first_failing_batch = hi;
  predict(c);
  RunLabel label = base.label;
  label.batch = static_cast<int>(std::max<std::int64_t>(1, lo));
  const std::string output = opts.output.empty() ? base.output : expand_output(opts.output, label);
  auto write = [&](Report report) {
    report.capacity = c;
    try {
      write_report(output, report);
      return true;
    } catch (const std::exception& e) {
      obs.problem(std::string("--output: ") + e.what());
      return false;
    }
  };

  if (stopped != RunStatus::kComplete) {
    // What was found is kept: the largest batch that fitted so far, not
    // confirmed, with a note saying the search did not finish.
    const bool kept = best.has_value();
    if (kept) {
      best->events.push_back(make_event(EventKind::kNote, std::nullopt, std::nullopt,
                                   std::string("--find-max-batch stopped at try ") + std::to_string(c.tries.size()) +
                                       " (" + status_word(stopped) + "): max_batch is the largest that fitted so far",
                                   std::nullopt));
    }
    const bool written = kept && write(std::move(*best));
    obs.problem("--find-max-batch: the search stopped (try " + std::to_string(c.tries.size()) + " " +
                status_word(stopped) + "); " +
                (written ? "the largest batch that fitted so far (" + std::to_string(lo) + ") is in " + output
                         : std::string("nothing written")));
    return to_int(stopped == RunStatus::kInterrupted ? ExitCode::kInterrupted : ExitCode::kFailed);
  }

  // A fresh process shares the device with this one, whose CUDA context and
  // workspaces stay until it exits: against the whole device that is a
  // smaller budget, and on the H200 the fresh run of the answer failed for it
  // (alpha small, 2197504 samples). The check is made only under a limit
  // that leaves room for both.
  Confirmation conf;
  bool interrupted_in_confirmation = false;
  const std::optional<double> outside = held_by_this_process(plan, *session.probe);
  if (c.limit_source == CapacitySearch::LimitSource::kMemoryLimit &&
      (!outside || !plan.device.is_cuda() ||
       c.limit_mib + *outside <= cuda_device_info(plan.device.index()).total_mib)) {
    conf = confirm(base, plan, opts, c, obs);
    // Interrupted meanwhile: the children were stopped, which says nothing
    // about whether they fit. Not checked, and the search ends interrupted.
    if (opts.stop != nullptr && opts.stop->requested()) {
      conf = Confirmation{};
      interrupted_in_confirmation = true;
    } else {
      c.confirmed = conf.agreed;
    }
  } else {
    obs.search_confirmation_skipped(outside, c.limit_mib, c.max_batch);
  }

  // The report a user running max_batch afresh gets, with the search in it.
  if (!write(conf.fits ? std::move(*conf.fits) : best ? std::move(*best) : std::move(*failed))) {
    return to_int(ExitCode::kFailed);
  }
  obs.search_finished(c, output);
  if (interrupted_in_confirmation) return to_int(ExitCode::kInterrupted);
  return to_int(lo == 0 ? ExitCode::kOom : ExitCode::kOk);
}

}  // namespace memdiag::detail
