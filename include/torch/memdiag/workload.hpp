// The training workload a case file describes: an MLP, an optimizer, and a
// step whose graph lifetime the case chooses. It reports through a Recorder
// like any other training loop would.
#pragma once

#include "memdiag/case_spec.hpp"
#include "memdiag/distributed.hpp"
#include "memdiag/probe.hpp"
#include "memdiag/recorder.hpp"
#include "memdiag/stop_request.hpp"

#include <functional>
#include <c10/core/Device.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace memdiag {

// The tries of one --find-max-batch build the same model again and again,
// which for a large model is most of a try (beta medium: 0.66 s of 67 M
// weights drawn by the CPU's serial generator). The first build is kept in
// host memory with the CPU generator's state before and after it; a later
// build from the same state is a copy of it, and leaves the generator where
// a build would have: the same weights, the same requests of the device's
// allocator in the same order. Only MLPs are kept (LibTorch clones them).
class ModelCache {
 public:
  ModelCache();
  ~ModelCache();
  ModelCache(const ModelCache&) = delete;
  ModelCache& operator=(const ModelCache&) = delete;
  struct Kept;
  std::unique_ptr<Kept> kept;
  int builds = 0, copies = 0;  // how often each happened, for the search's words
};

struct WorkloadOptions {
  CaseSpec spec;
  std::string preset;
  int batch_size = 1;
  int steps = 1;
  int sequence_length = 0;  // a transformer's tokens per sample (0: the preset's)
  c10::Device device = c10::Device(c10::DeviceType::CPU);
  std::uint64_t seed = 0;
  // Make the per-thread cuBLAS workspaces before the first sample, and report
  // their size as an event; otherwise step 0 carries them (~64 MiB on H200).
  // A sweep's later runs make them again: the probe's reset_between_runs
  // frees them with the cache.
  bool warm_up_kernels = true;
  // Data parallel (null: one process). Gradients are averaged through flat
  // buckets made at the first backward and kept, as DDP does.
  Communicator* comm = nullptr;
  int rank_zero_extra_samples = 0;  // added to rank 0's local batch
  // ZeRO-1: each rank keeps optimizer state for its shard of the parameters
  // only, updates that shard, and broadcasts it to the others.
  ParallelMode mode = ParallelMode::kNone;
  // ZeRO-2/3: consecutive modules holding parameters per unit; the next
  // unit gathered while one runs.
  int unit_modules = 1;
  bool prefetch_next = false;
  // Remedies, resolved (checkpoint=N with N set): see memdiag/remedy.hpp.
  std::vector<Remedy> remedies;
  // A search's tries share one (null: every run builds its model).
  ModelCache* model_cache = nullptr;
  // Asked for the batch once the model and optimizer are made, before the
  // first step (HarnessOptions::await_batch); nullopt ends the run
  // interrupted. Empty: batch_size.
  std::function<std::optional<int>()> await_batch;
};

// Runs setup and every step, marking phases on rec, and fills the report's
// model figures from the parameters it built. Stops early, with the
// matching status, on c10::OutOfMemoryError (recorded as an "oom" event) or
// when a stop is requested (checked between phases).
RunStatus run_workload(const WorkloadOptions& opts, MemoryProbe& probe, Recorder& rec,
                       const StopRequest* interrupt = nullptr);

}  // namespace memdiag
