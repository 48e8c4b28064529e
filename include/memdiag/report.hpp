// The report model: what one run of a workload measured, as plain data.
//
// This is the seam between the measuring half (probes, recorder, workloads;
// needs LibTorch) and the reading half (analysis, renderers; does not). Every
// field here has one JSON spelling, fixed by schema/report.schema.json.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace memdiag {

// Bumped on any change a reader of an older version could misread.
inline constexpr int kSchemaVersion = 1;

inline constexpr double kMiB = 1024.0 * 1024.0;
inline double to_mib(std::int64_t bytes) { return static_cast<double>(bytes) / kMiB; }

// Phase names, in the order a step records them. Setup phases have no step.
namespace phase {
inline constexpr const char* kModelReady = "model_ready";
inline constexpr const char* kOptimizerReady = "optimizer_ready";
inline constexpr const char* kForward = "forward";
inline constexpr const char* kBackward = "backward";
inline constexpr const char* kStep = "step";
inline constexpr const char* kCleanup = "cleanup";
}  // namespace phase

// Bytes held by live tensors by role, counted from the tensors themselves
// rather than the allocator, so allocator-level deltas can be cross-checked.
struct TensorCensus {
  double parameters_mib = 0;
  double gradients_mib = 0;
  double optimizer_state_mib = 0;
};

struct Sample {
  std::string phase;
  std::optional<int> step;             // absent for setup phases
  double allocated_mib = 0;            // live tensor bytes at the end of the phase
  std::optional<double> reserved_mib;  // caching-allocator segments (CUDA only)
  std::optional<double> device_used_mib;     // whole device, every process (cudaMemGetInfo)
  double peak_allocated_mib = 0;             // highest allocated within this phase
  std::optional<double> inactive_split_mib;  // free bytes stranded inside split blocks
  std::optional<double> process_device_mib;  // this process, from NVML
  double elapsed_ms = 0;
  std::optional<TensorCensus> tensors;
};

// Things that happened besides phase boundaries: the cuBLAS workspace warm-up,
// an out-of-memory error, an interruption.
struct Event {
  std::string kind;  // "warmup", "oom", "interrupted", "error", "note"
  std::string phase;
  std::optional<int> step;
  std::string message;
  std::optional<double> mib;
};

struct RunConfig {
  int batch_size_per_device = 0;
  std::string preset;
  int steps = 0;
  std::string device;  // as resolved: "cpu", "cuda:0"
  std::uint64_t seed = 0;
  std::optional<double> memory_limit_mib;
  // Distributed identity; a single-process run is rank 0 of 1.
  int rank = 0;
  int local_rank = 0;
  int world_size = 1;
  std::string backend = "none";
  int rank_zero_extra_samples = 0;
  bool shard_optimizer_state = false;
};

struct ModelInfo {
  std::int64_t parameters = 0;
  std::int64_t parameter_bytes = 0;
};

struct Environment {
  std::string device_name;
  std::optional<double> device_total_mib;
  std::string torch_version;
  std::optional<std::string> cuda_runtime_version;
  std::optional<std::string> driver_version;
  std::string host;
  std::string start_time;  // ISO 8601, UTC
  std::string memdiag_version;
};

enum class RunStatus { kComplete, kOom, kInterrupted, kFailed };
const char* to_string(RunStatus s);
std::optional<RunStatus> run_status_from_string(const std::string& s);

struct Report {
  int schema_version = kSchemaVersion;
  std::string case_name;
  std::string case_description;
  // The resolved case as it was run. Kept opaque on purpose: analysis never
  // reads it, so a verdict cannot depend on a case's declared behaviour.
  nlohmann::json case_spec = nlohmann::json::object();
  RunConfig config;
  ModelInfo model;
  Environment environment;
  std::vector<Sample> samples;
  std::vector<Event> events;
  RunStatus status = RunStatus::kComplete;
};

}  // namespace memdiag
