// How a run is spread over processes: one process, data parallel with the
// model replicated, data parallel with model state sharded, or tensor
// parallel (each rank a slice of every split layer, every rank the same
// batch). A closed set
// with one definition per mode (what it shards, the causes it answers, the
// flag that asks for it), read by the report's reader and writer, the
// comparison and the help, as remedies are.
#pragma once

#include "memdiag/cause.hpp"

#include <string>
#include <vector>

namespace memdiag {

enum class ParallelMode {
  kNone,   // one process
  kDdp,    // data parallel, every rank holds the whole model state
  kZero1,  // data parallel, each rank keeps the optimizer state of its shard only
  kZero2,  // ... and its shard of the gradients (reduce-scattered after each unit's backward)
  kZero3,  // ... and its shard of the parameters (gathered around each unit's forward and backward: FSDP)
  kTensor, // tensor parallel (Megatron-LM's MLP): the MLP's Linears in pairs, the first of each split by its
           // output features, the second by its input features, one all-reduce per pair each way
};
// "none", "ddp", "zero1", "zero2", "zero3", "tensor": the report's
// spelling. Its one table of names.
const char* to_string(ParallelMode m);

struct ParallelModeDefinition {
  ParallelMode mode = ParallelMode::kNone;
  const char* summary = "";
  // The memory_diagnostics flag that asks for the mode under a launcher;
  // empty for the modes a launcher alone gives.
  const char* flag = "";
  // ZeRO's sharding of the whole model's state, flat, among data-parallel
  // ranks: the optimizer state, then the gradients (by unit), then the
  // parameters (gathered around each unit's use).
  bool shards_optimizer_state = false;
  std::vector<Cause> answers;  // the causes the mode is meant to reduce
  bool shards_gradients = false;
  bool shards_parameters = false;
  // Tensor parallelism: each split layer's weights, their gradients and
  // optimizer state, and the activations between a split pair, divided
  // among the ranks (each rank holds 1/N of each); the layers left whole
  // (an unpaired output layer, a row-parallel layer's bias) are replicated.
  // Nothing is gathered: the ranks add up partial outputs instead.
  bool splits_layers = false;
};
const ParallelModeDefinition& definition(ParallelMode m);
// The sharded modes meant for a cause.
std::vector<ParallelMode> modes_answering(Cause c);

struct Parallelism {
  ParallelMode mode = ParallelMode::kNone;
  int world_size = 1;
  int rank = 0;
  int local_rank = 0;
  std::string backend = "none";  // "gloo", "nccl"
  // Samples rank 0 carries beyond the others' (an imbalanced job).
  int rank_zero_extra_samples = 0;
  // ZeRO-2 and ZeRO-3: how many consecutive modules that hold parameters
  // make one unit (gathered, freed and reduce-scattered together), and
  // whether the next unit is gathered while one runs.
  int unit_modules = 1;
  bool prefetch_next = false;
  // What the ranks of one launch share and no other launch does (rank 0
  // makes it and hands it to the others over the job's store): reports
  // given together are one rank set only where it is equal. Empty where
  // the writer could not tell (an older report, no store).
  std::string launch;
};

// Whether the mode divides model state among the ranks (a ZeRO stage or
// tensor parallelism): the comparison measures it against the replicated
// run of the same configuration, as a remedy.
bool is_sharded(ParallelMode m);

// The model state one rank holds under mode m at world n: weights,
// gradients and k times the weights of optimizer state (k = 2 for AdamW's
// moments, 0 for plain SGD), each divided by n where the mode shards it:
// replicated (2+k)P, ZeRO-1 2P + kP/n, ZeRO-2 P + (1+k)P/n, ZeRO-3
// (2+k)P/n (fp32 AdamW: 4P, 2P + 2P/n, P + 3P/n, 4P/n; the ZeRO paper's
// formulas with K = 12 in mixed precision). Tensor parallelism divides the
// split layers' part S of P (split_parameter_mib, the report's
// model.split_parameter_bytes) and keeps the rest whole: weights
// P - S + S/n per rank, and the same again for the gradients and k times
// for the state: (2+k)(P - S + S/n).
double model_state_per_rank(ParallelMode m, double parameter_mib, double state_per_parameter, int n,
                            double split_parameter_mib = 0);
// The weights alone one rank holds: P, P/n under ZeRO-3, P - S + S/n under
// tensor parallelism.
double parameters_per_rank(ParallelMode m, double parameter_mib, int n, double split_parameter_mib = 0);

}  // namespace memdiag
