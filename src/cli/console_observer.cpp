#include "console_observer.hpp"

#include "memdiag/format.hpp"

#include <algorithm>
#include <iomanip>
#include <map>
#include <ostream>

namespace memdiag::cli {
namespace {

std::string mib(double v) { return format_mib(v) + " MiB"; }

const char* status_word(RunStatus s) {
  switch (s) {
    case RunStatus::kComplete: return "fits";
    case RunStatus::kOom: return "out of memory";
    case RunStatus::kInterrupted: return "interrupted";
    case RunStatus::kFailed: return "failed";
  }
  return "?";
}

// The allocator's state at a failure, in MiB: "64.00 MiB requested with
// 832.8 of 900.0 MiB in use".
std::string failure_words(const std::optional<double>& request, const std::optional<double>& in_use,
                          const std::optional<double>& budget) {
  std::string s;
  if (request) s = format_mib(*request) + " MiB requested";
  if (in_use) {
    s += std::string(s.empty() ? "" : " with ") + format_mib(*in_use) + (budget ? " of " + mib(*budget) : " MiB") +
         " in use";
  }
  return s;
}

void print_header(std::ostream& out) {
  out << std::right << std::setw(5) << "step" << "  " << std::left << std::setw(16) << "phase" << std::right
      << std::setw(12) << "alloc MiB" << std::setw(12) << "peak MiB" << std::setw(12) << "reserved"
      << std::setw(12) << "device" << std::setw(10) << "ms" << "\n";
}

void print_row(std::ostream& out, const Sample& s) {
  out << std::right << std::setw(5) << (s.step ? std::to_string(*s.step) : std::string("-")) << "  " << std::left
      << std::setw(16) << to_string(s.phase) << std::right << std::setw(12) << format_mib(s.allocated_mib)
      << std::setw(12) << format_mib(s.peak_allocated_mib) << std::setw(12) << format_mib(s.reserved_mib)
      << std::setw(12) << format_mib(s.device_used_mib) << std::setw(10) << format_fixed(s.elapsed_ms, 1) << "\n"
      << std::flush;
}

}  // namespace

std::string outcome_words(const SweepRow& row) {
  std::string s = std::string(to_string(row.status)) + ", peak " + mib(row.peak_mib);
  const std::string failure = failure_words(row.oom_request_mib, row.oom_in_use_mib, row.oom_budget_mib);
  if (row.status == RunStatus::kOom && !failure.empty()) s += " (" + failure + ")";
  return s;
}

ConsoleObserver::ConsoleObserver(std::string program, bool quiet, std::ostream& out, std::ostream& err)
    : program_(std::move(program)), quiet_(quiet), talk_(!quiet), out_(out), err_(err) {}

void ConsoleObserver::session_started(const SessionInfo& s) { talk_ = !quiet_ && s.rank == 0; }

void ConsoleObserver::problem(const std::string& line) { err_ << program_ << ": " << printable(line) << "\n" << std::flush; }

void ConsoleObserver::note(const std::string& line) {
  if (talk_) out_ << printable(line) << "\n";
}

void ConsoleObserver::run_started(const RunHeading& h) {
  if (!talk_) return;
  out_ << "memdiag " << MEMDIAG_VERSION << ": case " << printable(h.case_name) << " (preset " << printable(h.preset)
       << ", batch " << h.batch << ", " << h.steps << " step" << (h.steps == 1 ? "" : "s")
       << (h.remedies.empty() ? std::string() : ", remedy " + h.remedies) << ") on " << h.device << " ["
       << printable(h.device_name) << "]\n";
  print_header(out_);
}

void ConsoleObserver::sample_taken(const Sample& s, const Report& r) {
  if (!talk_) return;
  print_row(out_, s);
  if (s.phase == Phase::kModelReady) {
    out_ << "       model: " << r.model.parameters << " parameters (" << mib(to_mib(r.model.parameter_bytes)) << ")\n";
  }
}

void ConsoleObserver::run_finished(const Report& r, const std::string& output) {
  for (const Event& ev : r.events) {
    if (ev.kind != EventKind::kOom) continue;
    const OomDetails d = ev.oom.value_or(OomDetails{});
    const std::string where = std::string(ev.phase ? to_string(*ev.phase) : "an unknown phase") +
                              (ev.step ? " of step " + std::to_string(*ev.step) : "");
    const std::string failure = failure_words(d.request_mib, d.allocated_mib, d.limit_mib ? d.limit_mib : r.config.memory_limit_mib);
    if (talk_) {
      out_ << "out of memory in " << where << (failure.empty() ? "" : ": " + failure) << " (" << printable(ev.message)
           << ")\n";
    }
  }
  if (output.empty()) return;
  if (talk_) {
    out_ << "wrote " << printable(output) << " (status " << to_string(r.status) << ")\n";
  } else if (r.status == RunStatus::kOom) {
    err_ << program_ << ": out of memory; report written to " << printable(output) << "\n";
  }
}

void ConsoleObserver::file_written(const std::string& path, const std::string& what, double size_mib) {
  if (talk_) out_ << "wrote " << printable(path) << " (" << what << ", " << mib(size_mib) << ")\n";
}

void ConsoleObserver::sweep_run_finished(const SweepRow& row, std::size_t index, std::size_t total) {
  if (!talk_) return;
  err_ << "[" << index << "/" << total << "] " << printable(row.label) << ": " << outcome_words(row) << ", "
       << format_fixed(row.seconds, 2) << " s\n"
       << std::flush;
}

void ConsoleObserver::sweep_finished(const std::vector<SweepRow>& rows, std::size_t planned) {
  if (!talk_) return;
  std::size_t w = 3;
  for (const SweepRow& r : rows) w = std::max(w, printable(r.label).size());
  out_ << std::left << std::setw(static_cast<int>(w)) << "run" << "  " << std::setw(11) << "status" << std::right
       << std::setw(10) << "peak MiB" << std::setw(14) << "reserved MiB" << std::setw(8) << "s" << "  report\n";
  std::map<RunStatus, int> count;
  double total_s = 0;
  for (const SweepRow& r : rows) {
    out_ << std::left << std::setw(static_cast<int>(w)) << printable(r.label) << "  " << std::setw(11)
         << to_string(r.status) << std::right << std::setw(10) << format_mib(r.peak_mib) << std::setw(14)
         << format_mib(r.peak_reserved_mib) << std::setw(8) << format_fixed(r.seconds, 2) << "  " << printable(r.output);
    const std::string failure = failure_words(r.oom_request_mib, r.oom_in_use_mib, r.oom_budget_mib);
    if (r.status == RunStatus::kOom && !failure.empty()) out_ << "  (" << failure << ")";
    out_ << "\n";
    ++count[r.status];
    total_s += r.seconds;
  }
  out_ << rows.size() << " of " << planned << " runs in " << format_fixed(total_s, 2) << " s:";
  bool first = true;
  for (const auto& [status, n] : count) {
    out_ << (first ? " " : ", ") << n << " " << to_string(status);
    first = false;
  }
  out_ << "\n";
}

void ConsoleObserver::search_started(const SearchHeading& h) {
  if (!talk_) return;
  out_ << "memdiag " << MEMDIAG_VERSION << ": largest batch of " << printable(h.case_name) << " (preset "
       << printable(h.preset) << ", " << h.steps << " step" << (h.steps == 1 ? "" : "s") << ") within "
       << mib(h.limit_mib) << " on " << h.device << "\n";
}

void ConsoleObserver::search_tried(const CapacityTry& t, std::size_t index) {
  if (!talk_) return;
  err_ << "try " << index << ": batch " << t.batch << " " << status_word(t.status) << ", peak "
       << mib(t.peak_allocated_mib) << ", " << format_fixed(t.seconds, 2) << " s\n"
       << std::flush;
}

void ConsoleObserver::search_confirming(std::int64_t batch, std::optional<RunStatus> status) {
  if (!talk_) return;
  err_ << "confirm: batch " << batch << " in a fresh process: " << (status ? status_word(*status) : "no report") << "\n";
}

void ConsoleObserver::search_confirmation_skipped(std::optional<double> outside_mib, double limit_mib,
                                                  std::int64_t max_batch) {
  if (!talk_) return;
  err_ << "confirm: skipped: a fresh process would share the device with this one's CUDA context"
       << (outside_mib ? " (" + mib(*outside_mib) + " by NVML)" : std::string()) << ", so it would have less than "
       << mib(limit_mib) << "; run batch " << max_batch << " alone to check it\n";
}

void ConsoleObserver::search_finished(const CapacitySearch& c, const std::string& output) {
  if (!talk_) return;
  const std::string limit = mib(c.limit_mib) + (c.limit_source == CapacitySearch::LimitSource::kDevice
                                                     ? " (what the device leaves to the allocator)"
                                                     : "");
  if (c.max_batch == 0) {
    out_ << "not even one sample fits within " << limit << "\n";
  } else {
    out_ << "largest batch that fits within " << limit << ": " << c.max_batch;
    if (c.first_failing_batch) {
      out_ << " (" << *c.first_failing_batch << " runs out of memory)";
    } else {
      out_ << " (the largest batch memdiag runs; no limit reached)";
    }
    out_ << "\n";
  }
  if (c.predicted_max_batch && c.fit_fixed_mib && c.fit_per_sample_mib) {
    out_ << "predicted by the capacity model from the tries: " << *c.predicted_max_batch << " ("
         << (c.binding_phase ? to_string(*c.binding_phase) : "?") << " binds: " << mib(*c.fit_fixed_mib) << " + "
         << format_fixed(*c.fit_per_sample_mib, 4) << " MiB per sample)\n";
  }
  if (c.confirmed) out_ << "fresh processes: " << (*c.confirmed ? "agree" : "DISAGREE (see the confirm lines above)") << "\n";
  out_ << "tries: " << c.tries.size() << "; wrote " << printable(output) << "\n";
}

bool ConsoleObserver::streams_ok() const { return static_cast<bool>(out_) && static_cast<bool>(err_); }

}  // namespace memdiag::cli
