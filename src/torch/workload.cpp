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
  std::string message =
      "kernel library workspaces made before the first sample (cuBLAS: one per thread; persistent, included in "
      "every later figure)";
  if (o.known_warmup_mib) message += "; made by the first run of this process";
  rec.add_event(Event{EventKind::kWarmup, Phase::kSetup, std::nullopt, message,
                      o.known_warmup_mib.value_or(after - before)});
  rec.restart_phase();
}

bool interrupted(const std::atomic<bool>* flag) { return flag != nullptr && flag->load(); }

// One run's training state, built and stepped one phase at a time; each
// method does one phase's work and records its sample. `phase` (owned by the
// caller, so it outlives this object) says where an out-of-memory error
// struck.
class Training {
 public:
  Training(const WorkloadOptions& o, Recorder& rec, Phase& phase)
      : o_(o), rec_(rec), phase_(phase), mspec_(o.spec.preset(o.preset).model) {}

  void model_ready() {
    phase_ = Phase::kModelReady;
    model_ = build_model(mspec_);
    model_->to(o_.device, model_dtype(mspec_));
    params_ = model_->parameters();
    // The model's size as built, read from its tensors rather than from a
    // formula that restates the architecture.
    ModelInfo& info = rec_.report().model;
    info = ModelInfo{};
    for (const torch::Tensor& p : params_) {
      info.parameters += p.numel();
      info.parameter_bytes += static_cast<std::int64_t>(p.numel()) * static_cast<std::int64_t>(p.element_size());
    }
    if (o_.comm != nullptr) {
      // Every rank starts from rank 0's weights.
      torch::NoGradGuard no_grad;
      o_.comm->broadcast(params_, 0);
    }
    rec_.mark(Phase::kModelReady, take_census(params_, nullptr));
  }

  void optimizer_ready() {
    phase_ = Phase::kOptimizerReady;
    sharded_ = o_.comm != nullptr && o_.shard_optimizer_state;
    if (sharded_) owner_ = shard_owners(params_, o_.comm->world_size());
    std::vector<torch::Tensor> owned;
    for (std::size_t i = 0; i < params_.size(); ++i) {
      if (!sharded_ || owner_[i] == o_.comm->rank()) owned.push_back(params_[i]);
    }
    optimizer_ = make_optimizer(o_.spec.optimizer, owned);
    local_batch_ = o_.batch_size + (o_.comm != nullptr && o_.comm->rank() == 0 ? o_.rank_zero_extra_samples : 0);
    rec_.mark(Phase::kOptimizerReady, census());
  }

  void forward() {
    phase_ = Phase::kForward;
    const auto data = torch::TensorOptions().device(o_.device).dtype(model_dtype(mspec_));
    const auto labels = torch::TensorOptions().device(o_.device).dtype(torch::kLong);
    // The batch is made on the device inside the phase, as a loader's
    // host-to-device copy would be; the first Linear saves it for backward.
    x_ = torch::randn({local_batch_, mspec_.input_dim}, data);
    y_ = torch::randint(0, mspec_.output_dim, {local_batch_}, labels);
    logits_ = model_->forward(x_);
    loss_ = torch::nn::functional::cross_entropy(logits_.to(torch::kFloat), y_);
    rec_.mark(Phase::kForward, census());
  }

  void backward() {
    phase_ = Phase::kBackward;
    loss_.backward({}, o_.spec.graph.retain_graph);
    if (o_.comm != nullptr) buckets_.all_reduce(params_, *o_.comm);
    rec_.mark(Phase::kBackward, census());
  }

  void step() {
    phase_ = Phase::kStep;
    optimizer_->step();
    if (sharded_) {
      // ZeRO-1's all-gather: each shard's owner sends its updated weights.
      torch::NoGradGuard no_grad;
      for (std::size_t i = 0; i < params_.size(); ++i) {
        std::vector<torch::Tensor> one{params_[i]};
        o_.comm->broadcast(one, owner_[i]);
      }
    }
    rec_.mark(Phase::kStep, census());
  }

  void cleanup() {
    phase_ = Phase::kCleanup;
    optimizer_->zero_grad(/*set_to_none=*/true);
    if (sharded_) {
      for (torch::Tensor& p : params_) p.mutable_grad() = torch::Tensor();  // the shards others own
    }
    if (o_.spec.graph.keep_graph_connected_loss) {
      kept_losses_.push_back(loss_);  // graph-connected: keeps every saved activation alive
    } else {
      // The repair, read out as a logger would: a detached CPU scalar. Its
      // value is not reported.
      logged_loss_sum_ += loss_.detach().to(torch::kCPU).item<double>();
    }
    x_ = y_ = logits_ = loss_ = torch::Tensor();
    rec_.mark(Phase::kCleanup, census());
  }

 private:
  TensorCensus census() const { return take_census(params_, optimizer_.get()); }

  const WorkloadOptions& o_;
  Recorder& rec_;
  Phase& phase_;
  const ModelSpec& mspec_;
  torch::nn::Sequential model_{nullptr};
  std::vector<torch::Tensor> params_;
  bool sharded_ = false;
  std::vector<int> owner_;  // the rank that owns each parameter's optimizer state (ZeRO-1)
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  GradientBuckets buckets_;
  std::int64_t local_batch_ = 0;
  torch::Tensor x_, y_, logits_, loss_;     // the step in progress
  std::vector<torch::Tensor> kept_losses_;  // gamma's leak lives here when asked for
  double logged_loss_sum_ = 0;
};

}  // namespace

RunStatus run_workload(const WorkloadOptions& o, MemoryProbe& probe, Recorder& rec,
                       const std::atomic<bool>* interrupt) {
  torch::manual_seed(o.seed);
  Phase phase = Phase::kSetup;
  try {
    if (o.warm_up_kernels) warm_up(o, probe, rec);
    Training t(o, rec, phase);
    for (void (Training::*setup)() : {&Training::model_ready, &Training::optimizer_ready}) {
      (t.*setup)();
      if (interrupted(interrupt)) return RunStatus::kInterrupted;
    }
    for (int step = 0; step < o.steps; ++step) {
      rec.begin_step(step);
      for (void (Training::*work)() : {&Training::forward, &Training::backward, &Training::step, &Training::cleanup}) {
        (t.*work)();
        if (interrupted(interrupt)) return RunStatus::kInterrupted;
      }
    }
    return RunStatus::kComplete;
  } catch (const c10::OutOfMemoryError& e) {
    std::string msg = e.what_without_backtrace();
    const auto nl = msg.find('\n');
    if (nl != std::string::npos) msg.resize(nl);
    // The training state is gone by now; the peak of the failing phase is
    // still in the counters and tells how far the phase got.
    rec.add_event(Event{EventKind::kOom, phase, rec.current_step(), msg, probe.read().peak_allocated_mib});
    return RunStatus::kOom;
  }
}

}  // namespace memdiag
