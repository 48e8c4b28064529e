// The torch layer's one job in a run: memdiag::Executor with LibTorch.
// A configuration runs through the workload on the plan's device under its
// probe (the CUDA caching allocator or the CPU tracking allocator), traced
// where asked, joining the launcher's process group at the first run; a
// search's tries share their model's first build. What to run and in what
// order is the run layer's (memdiag/harness.hpp).
#pragma once

#include "memdiag/executor.hpp"

#include <memory>

namespace memdiag {

namespace detail {
struct Session;
}

class TorchExecutor final : public Executor {
 public:
  TorchExecutor();
  ~TorchExecutor() override;
  TorchExecutor(const TorchExecutor&) = delete;
  TorchExecutor& operator=(const TorchExecutor&) = delete;

  bool cuda_compiled() const override;
  std::optional<int> cuda_device_count() const override;
  std::string allocator_settings() const override;

  std::optional<int> open_session(const ResolvedPlan& plan, const HarnessOptions& opts, RunObserver& obs) override;
  Report run(const PlannedRun& run, const ResolvedPlan& plan, const HarnessOptions& opts, RunObserver& obs,
             bool live) override;
  bool write_snapshots(const HarnessOptions& opts, Report& report, RunObserver& obs) override;
  void reset_between_runs() override;
  ProbeReading read_probe() override;
  double device_total_mib() override;
  std::optional<std::int64_t> limit_bytes() const override;
  void share_model_builds(bool on) override;

 private:
  std::unique_ptr<detail::Session> session_;
  int device_index_ = 0;
};

}  // namespace memdiag
