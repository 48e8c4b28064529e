#include "memdiag/format.hpp"
#include "run_plan.hpp"

#include <algorithm>
#include <iomanip>
#include <map>
#include <ostream>

namespace memdiag::detail {

SweepRow sweep_row(const PlannedRun& run, const Varying& v, const Report& report, double seconds) {
  SweepRow row;
  row.label = describe_run(run.label, v);
  row.status = report.status;
  for (const Sample& s : report.samples) {
    row.peak_mib = std::max(row.peak_mib, s.peak_allocated_mib);
    if (s.reserved_mib) row.peak_reserved_mib = std::max(row.peak_reserved_mib.value_or(0), *s.reserved_mib);
  }
  row.seconds = seconds;
  row.output = run.output;
  return row;
}

void print_progress_line(const SweepRow& row, std::size_t index, std::size_t total, std::ostream& err) {
  err << "[" << index << "/" << total << "] " << row.label << ": " << to_string(row.status) << ", peak "
      << format_mib(row.peak_mib) << " MiB, " << format_fixed(row.seconds, 2) << " s\n"
      << std::flush;
}

void print_summary(const std::vector<SweepRow>& rows, std::size_t planned, std::ostream& out) {
  std::size_t w = 3;
  for (const SweepRow& r : rows) w = std::max(w, r.label.size());
  out << std::left << std::setw(static_cast<int>(w)) << "run" << "  " << std::setw(11) << "status" << std::right
      << std::setw(10) << "peak MiB" << std::setw(14) << "reserved MiB" << std::setw(8) << "s" << "  report\n";
  std::map<RunStatus, int> count;
  double total_s = 0;
  for (const SweepRow& r : rows) {
    out << std::left << std::setw(static_cast<int>(w)) << r.label << "  " << std::setw(11) << to_string(r.status)
        << std::right << std::setw(10) << format_mib(r.peak_mib) << std::setw(14) << format_mib(r.peak_reserved_mib)
        << std::setw(8) << format_fixed(r.seconds, 2) << "  " << r.output << "\n";
    ++count[r.status];
    total_s += r.seconds;
  }
  out << rows.size() << " of " << planned << " runs in " << format_fixed(total_s, 2) << " s:";
  bool first = true;
  for (const auto& [status, n] : count) {
    out << (first ? " " : ", ") << n << " " << to_string(status);
    first = false;
  }
  out << "\n";
}

}  // namespace memdiag::detail
