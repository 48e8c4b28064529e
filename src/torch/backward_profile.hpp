// Backward's memory, node by node, at one step: what memory_diagnostics'
// own workloads write to model.backward_profile, as the Python recorder
// writes it for a user's loop (python/memdiag/_backward_profile.py, whose
// rules these are).
//
// Why: a job's largest batch is bounded where memory peaks, in a training
// step usually inside backward, after some weight gradients are made and
// before the activations they belong to are freed. Of what backward holds
// there the gradients do not grow with the batch and the rest does; from
// the phase's boundaries alone the two cannot be told apart (a case file's
// MLP: the first weight gradient, made while every activation is held, was
// left out and the batch said to fit ran 8% over its budget,
// docs/measurements/cpu/capacity-check-s62).
//
// How: before the backward runs, a post hook on every node of its graph
// and a post-accumulate hook on every parameter read the allocator's
// counts (allocated now, and the peak since the reading before, which is
// then reset; the phase's peak is carried to the recorder). A node's
// gradient bytes are those already accumulated into a parameter whose
// gradient was unset at backward's start, and those in flight to one (a
// node's outputs that reach an AccumulateGrad through nodes of one input),
// each storage once. AccumulateGrad nodes carry no hook of their own: a
// post hook keeps the incoming gradient referenced and the node then
// copies it instead of taking it.
#pragma once

#include "memdiag/probe.hpp"
#include "memdiag/recorder.hpp"
#include "memdiag/report.hpp"

#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace torch::autograd {
struct Node;
}

namespace memdiag {

class BackwardProfiler {
 public:
  // Hooks the backward that `loss` will run (call just before it). Nothing
  // is hooked where the probe cannot read inside a phase, the graph has
  // more than kNodeCap nodes or a parameter carries a post-accumulate hook
  // of someone else's.
  BackwardProfiler(const torch::Tensor& loss, const std::vector<torch::Tensor>& parameters, MemoryProbe& probe,
                   Recorder& recorder);
  ~BackwardProfiler();  // the hooks off (a backward that ran out of memory, a retained graph)
  BackwardProfiler(const BackwardProfiler&) = delete;
  BackwardProfiler& operator=(const BackwardProfiler&) = delete;

  // After the backward ran to its end: the profile, or empty (a reading
  // failed, nothing was hooked).
  std::optional<BackwardProfile> finish(std::int64_t step, std::int64_t samples, std::optional<std::int64_t> tokens);

  static constexpr std::size_t kNodeCap = 20000;

 private:
  struct InFlight {
    std::int64_t bytes;
    const void* parameter;  // its TensorImpl
  };
  using Flights = std::map<const void*, InFlight>;  // by storage
  struct Reading {
    std::int64_t peak;
    std::int64_t held;  // allocated when the node was done
    std::int64_t gradient_bytes;
    std::int64_t operand_bytes;  // the gradients it took and gave
    std::string name;
  };
  struct ChainEdge {
    std::size_t output;
    const torch::autograd::Node* consumer;
    const void* parameter;
  };
  struct NodeInfo {
    std::string name;
    std::vector<ChainEdge> edges;
    std::vector<std::size_t> batch_outputs;  // the outputs that go to no parameter
    bool weights_only = false;               // on a gradient's way to its parameter
  };

  std::pair<std::int64_t, std::int64_t> read();
  void on_node(const torch::autograd::Node* node, const NodeInfo& info, const std::vector<torch::Tensor>& outputs,
               const std::vector<torch::Tensor>& inputs);
  void on_accumulated(const torch::Tensor& parameter);
  std::int64_t flying(const std::map<const torch::autograd::Node*, Flights>* more = nullptr) const;

  MemoryProbe& probe_;
  Recorder& recorder_;
  bool hooked_ = false;
  bool failed_ = false;
  std::int64_t start_ = 0;
  std::int64_t made_ = 0;
  std::set<const void*> unset_;
  std::map<const torch::autograd::Node*, Flights> in_flight_;
  std::vector<Reading> readings_;
  std::vector<std::pair<std::weak_ptr<torch::autograd::Node>, std::uintptr_t>> node_hooks_;
  std::vector<torch::Tensor> hooked_parameters_;
};

}  // namespace memdiag
