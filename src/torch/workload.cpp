#include "memdiag/workload.hpp"

#include "memdiag/tensor_census.hpp"
#include "data_parallel.hpp"
#include "model.hpp"

#include <c10/util/Exception.h>
#include <torch/nn/functional/loss.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>
#include <torch/utils.h>

#include <algorithm>
#include <memory>
#include <vector>

namespace memdiag {
namespace {

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const OptimizerSpec& o,
                                                        const std::vector<torch::Tensor>& params) {
  switch (o.type) {
    case OptimizerType::kAdamW:
      return std::make_unique<torch::optim::AdamW>(
          params, torch::optim::AdamWOptions(o.lr).betas({o.beta1, o.beta2}).eps(o.eps).weight_decay(o.weight_decay));
    case OptimizerType::kAdam:
      return std::make_unique<torch::optim::Adam>(
          params, torch::optim::AdamOptions(o.lr).betas({o.beta1, o.beta2}).eps(o.eps).weight_decay(o.weight_decay));
    case OptimizerType::kSgd: break;
  }
  return std::make_unique<torch::optim::SGD>(
      params, torch::optim::SGDOptions(o.lr).momentum(o.momentum).weight_decay(o.weight_decay));
}

// The first matmul on a thread makes that thread's cuBLAS workspace through
// the caching allocator, and autograd runs CUDA backward on its own thread.
// Linear's forward is addmm with a bias, which takes the cuBLASLt path and its
// own workspace (1 MiB more on the H200). All of them persist. A tiny
// Linear-shaped forward+backward makes them now, so step 0 measures the
// workload rather than library set-up; the event says how much it was.
void warm_up(const WorkloadOptions& o, MemoryProbe& probe, Recorder& rec) {
  const double before = probe.read().allocated_mib;
  {
    const auto opts = torch::TensorOptions().device(o.device).dtype(model_dtype(o.spec.preset(o.preset).model));
    torch::Tensor x = torch::randn({64, 64}, opts).requires_grad_(true);
    torch::Tensor w = torch::randn({64, 64}, opts).requires_grad_(true);
    torch::Tensor bias = torch::randn({64}, opts).requires_grad_(true);
    torch::addmm(bias, x, w.t()).sum().backward();
  }
  const double after = probe.read().allocated_mib;
  rec.add_event(Event{EventKind::kWarmup, Phase::kSetup, std::nullopt,
                      "kernel library workspaces made before the first sample (cuBLAS: one per thread; "
                      "persistent, included in every later figure)",
                      after - before});
  rec.restart_phase();
}

bool interrupted(const std::atomic<bool>* flag) { return flag != nullptr && flag->load(); }

}  // namespace

RunStatus run_workload(const WorkloadOptions& o, MemoryProbe& probe, Recorder& rec,
                       const std::atomic<bool>* interrupt) {
  const PresetSpec& preset = o.spec.preset(o.preset);
  const ModelSpec& mspec = preset.model;
  const bool retain_graph = o.spec.graph.retain_graph;
  const bool keep_loss = o.spec.graph.keep_graph_connected_loss;
  torch::manual_seed(o.seed);

  Phase phase = Phase::kSetup;
  std::vector<torch::Tensor> kept_losses;  // gamma's leak lives here when asked for
  double logged_loss_sum = 0;              // the repair: a detached CPU scalar
  try {
    if (o.warm_up_kernels) warm_up(o, probe, rec);

    phase = Phase::kModelReady;
    torch::nn::Sequential model = build_model(mspec);
    model->to(o.device, model_dtype(mspec));
    std::vector<torch::Tensor> params = model->parameters();
    // The model's size as built, read from its tensors rather than from a
    // formula that restates the architecture.
    ModelInfo& info = rec.report().model;
    info = ModelInfo{};
    for (const torch::Tensor& p : params) {
      info.parameters += p.numel();
      info.parameter_bytes += static_cast<std::int64_t>(p.numel()) * static_cast<std::int64_t>(p.element_size());
    }
    if (o.comm != nullptr) {
      // Every rank starts from rank 0's weights.
      torch::NoGradGuard no_grad;
      o.comm->broadcast(params, 0);
    }
    rec.mark(Phase::kModelReady, take_census(params, nullptr));
    if (interrupted(interrupt)) return RunStatus::kInterrupted;

    phase = Phase::kOptimizerReady;
    const bool sharded = o.comm != nullptr && o.shard_optimizer_state;
    const std::vector<int> owner = sharded ? shard_owners(params, o.comm->world_size()) : std::vector<int>();
    std::vector<torch::Tensor> owned;
    for (std::size_t i = 0; i < params.size(); ++i) {
      if (!sharded || owner[i] == o.comm->rank()) owned.push_back(params[i]);
    }
    std::unique_ptr<torch::optim::Optimizer> optimizer = make_optimizer(o.spec.optimizer, owned);
    GradientBuckets buckets;
    const int local_batch =
        o.batch_size + (o.comm != nullptr && o.comm->rank() == 0 ? o.rank_zero_extra_samples : 0);
    rec.mark(Phase::kOptimizerReady, take_census(params, optimizer.get()));
    if (interrupted(interrupt)) return RunStatus::kInterrupted;

    const auto data_opts = torch::TensorOptions().device(o.device).dtype(model_dtype(mspec));
    const auto label_opts = torch::TensorOptions().device(o.device).dtype(torch::kLong);
    for (int step = 0; step < o.steps; ++step) {
      rec.begin_step(step);

      phase = Phase::kForward;
      // The batch is made on the device inside the phase, as a loader's
      // host-to-device copy would be; the first Linear saves it for backward.
      torch::Tensor x = torch::randn({local_batch, mspec.input_dim}, data_opts);
      torch::Tensor y = torch::randint(0, mspec.output_dim, {local_batch}, label_opts);
      torch::Tensor logits = model->forward(x);
      torch::Tensor loss = torch::nn::functional::cross_entropy(logits.to(torch::kFloat), y);
      rec.mark(Phase::kForward, take_census(params, optimizer.get()));
      if (interrupted(interrupt)) return RunStatus::kInterrupted;

      phase = Phase::kBackward;
      loss.backward({}, retain_graph);
      if (o.comm != nullptr) buckets.all_reduce(params, *o.comm);
      rec.mark(Phase::kBackward, take_census(params, optimizer.get()));
      if (interrupted(interrupt)) return RunStatus::kInterrupted;

      phase = Phase::kStep;
      optimizer->step();
      if (sharded) {
        // ZeRO-1's all-gather: each shard's owner sends its updated weights.
        torch::NoGradGuard no_grad;
        for (std::size_t i = 0; i < params.size(); ++i) {
          std::vector<torch::Tensor> one{params[i]};
          o.comm->broadcast(one, owner[i]);
        }
      }
      rec.mark(Phase::kStep, take_census(params, optimizer.get()));
      if (interrupted(interrupt)) return RunStatus::kInterrupted;

      phase = Phase::kCleanup;
      optimizer->zero_grad(/*set_to_none=*/true);
      if (sharded) {
        for (torch::Tensor& p : params) p.mutable_grad() = torch::Tensor();  // the shards others own
      }
      if (keep_loss) {
        kept_losses.push_back(loss);  // graph-connected: keeps every saved activation alive
      } else {
        logged_loss_sum += loss.detach().to(torch::kCPU).item<double>();
      }
      x = torch::Tensor();
      y = torch::Tensor();
      logits = torch::Tensor();
      loss = torch::Tensor();
      rec.mark(Phase::kCleanup, take_census(params, optimizer.get()));
      if (interrupted(interrupt)) return RunStatus::kInterrupted;
    }
    (void)logged_loss_sum;  // read out as a logger would; its value is not reported
    return RunStatus::kComplete;
  } catch (const c10::OutOfMemoryError& e) {
    std::string msg = e.what_without_backtrace();
    const auto nl = msg.find('\n');
    if (nl != std::string::npos) msg.resize(nl);
    // The step's tensors are gone by now; the peak of the failing phase is
    // still in the counters and tells how far the phase got.
    rec.add_event(Event{EventKind::kOom, phase, rec.current_step(), msg, probe.read().peak_allocated_mib});
    return RunStatus::kOom;
  }
}

}  // namespace memdiag
