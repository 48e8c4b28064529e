// The phase/step API a training loop calls. The harness is one user of it; any
// LibTorch loop can be another (see examples/).
//
//   memdiag::Recorder rec(probe);           // setup phase starts now
//   ... build model ...        rec.mark(memdiag::Phase::kModelReady);
//   ... build optimizer ...    rec.mark(memdiag::Phase::kOptimizerReady);
//   for (int s = 0; s < n; ++s) {
//     rec.begin_step(s);
//     ... forward ...          rec.mark(memdiag::Phase::kForward);
//     ...
//   }
//   memdiag::write_report(path, rec.finish(memdiag::RunStatus::kComplete));
//
// A phase runs from the previous mark (or begin_step) to its own mark; its
// sample holds the memory at the end and the peak within it.
#pragma once

#include "memdiag/probe.hpp"
#include "memdiag/report.hpp"

#include <algorithm>
#include <chrono>
#include <functional>
#include <optional>
#include <string>

namespace memdiag {

class Recorder {
 public:
  using Listener = std::function<void(const Sample&)>;

  explicit Recorder(MemoryProbe& probe);

  // Metadata (case, config, model, environment) goes here before finish().
  Report& report() { return report_; }

  // Starts a step: the next phase belongs to it and begins now, so time spent
  // between steps (logging, data loading) does not land in the forward phase.
  void begin_step(int step);

  // Ends the phase in progress and starts the next one.
  // micro_batch: which micro-batch of an accumulating step the phase belongs
  // to; loss: the step's mean loss, on its "step" sample.
  const Sample& mark(Phase phase, std::optional<TensorCensus> census = std::nullopt,
                     std::optional<int> micro_batch = std::nullopt, std::optional<double> loss = std::nullopt);

  // What the last sample's forward was given (its samples and, for a
  // sequence model, tokens): set after mark(kForward, ...).
  void note_inputs(std::int64_t samples, std::optional<std::int64_t> tokens);
  void add_event(Event event);
  // An event of the current step, in no particular phase.
  void add_event(EventKind kind, const std::string& message, std::optional<double> mib = std::nullopt);

  // Restarts the phase clock and the peak without recording, for work that
  // should not count toward any phase.
  void restart_phase();

  // A peak of the phase in progress read by someone who then reset the
  // probe's (readings inside a phase, node by node): the phase's sample
  // takes the larger of it and what the probe kept.
  void carry_peak(double mib) { carried_peak_mib_ = std::max(carried_peak_mib_, mib); }
  double carried_peak_mib() const { return carried_peak_mib_; }

  std::optional<int> current_step() const { return step_; }
  // Called with every sample as it is taken: progress output hangs off this.
  void set_listener(Listener l) { listener_ = std::move(l); }

  Report finish(RunStatus status);

 private:
  MemoryProbe& probe_;
  Report report_;
  std::optional<int> step_;
  std::chrono::steady_clock::time_point phase_start_;
  double carried_peak_mib_ = 0;
  Listener listener_;
};

}  // namespace memdiag
