// Configurations run in fresh processes of their own: this executable,
// one configuration each, quietly (memdiag/isolate.hpp's ChildProcesses).
// --find-max-batch checks its answer there, where a batch finder's answer
// often fails (Lightning #8028); its tests answer without starting any.
#pragma once

#include "memdiag/harness_options.hpp"
#include "memdiag/report.hpp"
#include "memdiag/run_plan.hpp"

#include <optional>
#include <vector>

namespace memdiag {

class FreshProcesses {
 public:
  virtual ~FreshProcesses() = default;
  // Runs them side by side to their ends, each in a process of its own;
  // their reports in the same order, nullopt where none was written. A
  // stop requested meanwhile is passed on. Throws memdiag::Error where one
  // cannot be started.
  virtual std::vector<std::optional<Report>> run(const std::vector<PlannedRun>& runs, const ResolvedPlan& plan,
                                                 const HarnessOptions& opts) = 0;
  // Starts `count` processes of `base` that make everything a run makes
  // before its first step (the process, the device's context, the model and
  // the optimizer) and then wait for their batch: a later run() of the same
  // configuration at any batch uses one instead of starting a process, so
  // the start and the model's build are paid while the caller works. They
  // are fresh processes all the same: nothing of another run was ever in
  // them. Unused ones end with this object. Default: none started.
  virtual void prepare(const PlannedRun& /*base*/, const ResolvedPlan& /*plan*/, const HarnessOptions& /*opts*/,
                       int /*count*/) {}
  // run() returns once each process has written its report; the process
  // may still be ending, its device memory not yet released. Returns once
  // every one of them has ended: before this process or another fresh one
  // uses the device again. Default: at once.
  virtual void settle() {}
};

}  // namespace memdiag
