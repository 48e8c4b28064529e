// Reports built from a simple memory model of a training step, for testing
// the analysis on patterns whose true cause the test knows.
#pragma once

#include "memdiag/report.hpp"

#include <optional>
#include <string>

namespace memdiag::testkit {

struct Synth {
  std::string case_name = "synthetic";
  std::string device = "cuda:0";
  std::string preset = "small";
  int batch = 8;
  int steps = 4;
  int rank = 0;
  int world_size = 1;
  double params_mib = 10;
  double activations_mib = 0;        // forward increment per step
  double optimizer_state_mib = 0;    // made at the first step(), kept
  double retained_per_step_mib = 0;  // kept after every cleanup
  double cache_mib = 0;              // reserved beyond the peak allocated
  double noise_mib = 0;              // alternating +/- on post-cleanup figures
};

Report synth(const Synth& s);
// A report with every field the writer can write (schema tests): a CUDA run
// that ran out of memory, with a census, losses, micro-batches, the oom
// event's details and a capacity search whose tries carry their phases.
Report full_report();

}  // namespace memdiag::testkit
