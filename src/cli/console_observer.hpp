// memory_diagnostics' words: the live table of a single run, a sweep's
// progress lines and summary, the search's tries, each outcome, and every
// problem as one line naming the program. The run and torch layers
// report through this and print nothing themselves.
#pragma once

#include "memdiag/run_observer.hpp"

#include <iosfwd>
#include <string>

namespace memdiag::cli {

class ConsoleObserver final : public RunObserver {
 public:
  // quiet: no table, progress or summary (problems are still said); only
  // rank 0 of a launched job talks.
  ConsoleObserver(std::string program, bool quiet, std::ostream& out, std::ostream& err);

  void session_started(const SessionInfo& s) override;
  void problem(const std::string& line) override;
  void note(const std::string& line) override;
  void run_started(const RunHeading& h) override;
  void sample_taken(const Sample& s, const Report& r) override;
  void run_finished(const Report& r, const std::string& output) override;
  void file_written(const std::string& path, const std::string& what, double mib) override;
  void sweep_run_finished(const SweepRow& row, std::size_t index, std::size_t total) override;
  void sweep_finished(const std::vector<SweepRow>& rows, std::size_t planned) override;
  void search_started(const SearchHeading& h) override;
  void search_tried(const CapacityTry& t, std::size_t index) override;
  void search_confirming(std::int64_t batch, std::optional<RunStatus> status) override;
  void search_confirmation_skipped(std::optional<double> outside_mib, double limit_mib, std::int64_t max_batch) override;
  void search_finished(const CapacitySearch& c, const std::string& output) override;

  // Whether everything written reached its stream (a full disk, a closed
  // pipe: the executable then exits 1).
  bool streams_ok() const;

 private:
  std::string program_;
  bool quiet_;
  bool talk_;
  std::ostream& out_;
  std::ostream& err_;
};

// "oom, peak 896.8 MiB (64.00 requested with 832.8 of 900.0 in use)": a run's
// status as a progress line and a summary say it.
std::string outcome_words(const SweepRow& row);

}  // namespace memdiag::cli
