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
#include <thread>

namespace memdiag {

// The tries of one --find-max-batch build the same model again and again,
// which for a large model is most of a try (beta medium: 0.66 s of 67 M
// weights drawn by the CPU's serial generator). The first build is kept in
// host memory with the CPU generator's state before and after it; a later
// build from the same state is a copy of it, and leaves the generator where
// a build would have: the same weights, the same requests of the device's
// allocator in the same order. Only MLPs are kept (LibTorch clones them).
//
// A CUDA run also builds its model ahead (build_model_ahead): on the host,
// in a thread of its own, while the process starts CUDA (about 0.6 s on the
// H200), and the run takes that build instead of making its own, under the
// same check of the generator's state.
class ModelCache {
 public:
  ModelCache();
  ~ModelCache();  // waits for a build ahead still running
  ModelCache(const ModelCache&) = delete;
  ModelCache& operator=(const ModelCache&) = delete;
  // Until a build ahead has finished (at once without one).
  void wait();
  struct Kept;
  std::unique_ptr<Kept> kept;
  // A search's cache keeps every build for copies; otherwise the build
  // ahead is taken by the first run whose build it is, and nothing is kept.
  bool keep_builds = true;
  int builds = 0, copies = 0;  // how often each happened, for the search's words
  std::thread ahead;  // the build ahead, while it runs
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

// Starts building the model run_workload(o) will build, on the host in a
// thread of its own from the CPU generator seeded as run_workload seeds it,
// into cache (ModelCache). False where the run would not take it (a
// transformer, a launched rank, a case that does not resolve): nothing
// started. The CPU generator is the thread's until cache.wait(), which
// run_workload calls before it seeds: nothing else in the process may draw
// from it meanwhile (starting CUDA does not).
bool build_model_ahead(const WorkloadOptions& o, ModelCache& cache);

}  // namespace memdiag
