#include "memdiag/sweep_row.hpp"

#include <algorithm>

namespace memdiag {

double run_peak(const Report& r) {
  double peak = peak_allocated_mib(r);
  for (const Event& e : r.events) {
    if (e.kind == EventKind::kOom && e.mib) peak = std::max(peak, *e.mib);
  }
  return peak;
}

SweepRow sweep_row(const PlannedRun& run, const Varying& v, const Report& report, double seconds) {
  SweepRow row;
  row.label = describe_run(run.label, v);
  row.status = report.status;
  row.peak_mib = run_peak(report);
  row.peak_reserved_mib = peak_reserved_mib(report);
  for (const Event& e : report.events) {
    if (e.kind != EventKind::kOom || !e.oom) continue;
    row.oom_in_use_mib = e.oom->allocated_mib;
    row.oom_request_mib = e.oom->request_mib;
    row.oom_budget_mib = e.oom->limit_mib ? e.oom->limit_mib : report.config.memory_limit_mib;
  }
  row.seconds = seconds;
  row.output = run.output;
  return row;
}

}  // namespace memdiag
