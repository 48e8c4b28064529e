#include "memdiag/workload.hpp"

#include "memdiag/probes.hpp"
#include "memdiag/tensor_census.hpp"
#include "memdiag/tracking_allocator.hpp"
#include "memdiag/autocast_guard.hpp"
#include "memdiag/checkpoint.hpp"
#include "memdiag/memory_snapshot.hpp"
#include "memdiag/allocation_tracer.hpp"
#include "backward_profile.hpp"
#include "data_parallel.hpp"
#include "sharded_units.hpp"
#include "tensor_parallel.hpp"
#include "model.hpp"
#include "offload.hpp"
#include "optimizers.hpp"

#include <c10/util/Exception.h>
#include <torch/nn/functional/loss.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>
#include <torch/autograd.h>
#include <torch/utils.h>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>

#include <algorithm>
#include <mutex>
#include <string>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <vector>

namespace memdiag {
namespace {

// How the optimizer keeps its state, as a remedy changes it.
enum class StateKeeping { kAsBuilt, kBf16, kBlockwise8bit, kOnHost, kAdafactor };

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const OptimizerSpec& o, StateKeeping keeping,
                                                        const std::vector<torch::Tensor>& params) {
  if (keeping == StateKeeping::kAdafactor) return std::make_unique<Adafactor>(params, AdafactorOptions());
  if (keeping != StateKeeping::kAsBuilt && o.type != OptimizerType::kSgd) {
    CompactAdamOptions c(o.lr);
    c.beta1(o.beta1).beta2(o.beta2).eps(o.eps).weight_decay(o.weight_decay).decoupled(o.type == OptimizerType::kAdamW);
    c.format(keeping == StateKeeping::kBf16           ? MomentFormat::kBf16
             : keeping == StateKeeping::kBlockwise8bit ? MomentFormat::kBlockwise8bit
                                                       : MomentFormat::kFp32);
    c.on_host(keeping == StateKeeping::kOnHost);
    return std::make_unique<CompactAdam>(params, c);
  }
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
// What the run trains once its remedies are applied: the case's settings,
// changed only where a remedy says so.
struct Effective {
  ModelSpec model;
  OptimizerSpec optimizer;
  bool retain_graph = false;
  bool keep_graph_connected_loss = false;
  int checkpoint_segments = 0;  // 0: no checkpointing
  int micro_batches = 1;
  bool autocast_bf16 = false;
  bool empty_cache = false;
  StateKeeping state = StateKeeping::kAsBuilt;
  bool offload_activations = false;
  int split = 1;  // forward in this many chunks, one backward
};

Effective effective(const WorkloadOptions& o) {
  Effective e;
  e.model = o.spec.preset(o.preset).model;
  if (e.model.kind == ModelKind::kTransformer && o.sequence_length > 0) e.model.sequence_length = o.sequence_length;
  e.optimizer = o.spec.optimizer;
  e.retain_graph = o.spec.graph.retain_graph;
  e.keep_graph_connected_loss = o.spec.graph.keep_graph_connected_loss;
  for (const Remedy& r : o.remedies) {
    switch (r.kind) {
      case RemedyKind::kCheckpoint: e.checkpoint_segments = r.param; break;
      case RemedyKind::kAccumulate: e.micro_batches = r.param; break;
      case RemedyKind::kBf16: e.model.dtype = DType::kBFloat16; break;
      case RemedyKind::kAutocastBf16: e.autocast_bf16 = true; break;
      case RemedyKind::kEmptyCache: e.empty_cache = true; break;
      case RemedyKind::kFixGraph:
        e.retain_graph = false;
        e.keep_graph_connected_loss = false;
        break;
      case RemedyKind::kSgd:
        // Stateless: no momentum buffer; the learning rate and weight decay stay.
        e.optimizer.type = OptimizerType::kSgd;
        e.optimizer.momentum = 0;
        break;
      case RemedyKind::kEfficientAttention: e.model.attention = AttentionKernel::kSdpa; break;
      case RemedyKind::kStateBf16: e.state = StateKeeping::kBf16; break;
      case RemedyKind::kState8bit: e.state = StateKeeping::kBlockwise8bit; break;
      case RemedyKind::kAdafactor: e.state = StateKeeping::kAdafactor; break;
      case RemedyKind::kOffloadState: e.state = StateKeeping::kOnHost; break;
      case RemedyKind::kOffloadActivations: e.offload_activations = true; break;
      case RemedyKind::kSplit: e.split = r.param; break;
      // Allocator settings act on the process, set by the harness before
      // the allocator's first segment; the training itself is the baseline's.
      case RemedyKind::kExpandableSegments:
      case RemedyKind::kMaxSplit:
      case RemedyKind::kGcThreshold:
      case RemedyKind::kRoundupPow2: break;
    }
  }
  return e;
}

// Autograd's thread makes its own cuBLASLt workspace the first time it runs
// a Linear's forward (addmm with a bias), as checkpointing's recomputation
// does (1 MiB on the H200; seen as a sweep's runs after a checkpointed one
// holding 1 MiB more than fresh processes). This Function does that in
// backward, without drawing random numbers.
class AddmmInBackward : public torch::autograd::Function<AddmmInBackward> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x) {
    ctx->save_for_backward({x});
    return x.clone();
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const torch::Tensor x = ctx->get_saved_variables()[0];
    // Made in Python's order (the compiler may make a call's arguments
    // right to left): the bias, then the ones.
    const torch::Tensor bias = torch::zeros({x.size(0)}, x.options());
    const torch::Tensor ones = torch::ones_like(x);
    (void)torch::addmm(bias, x, ones.t());
    return {grads[0]};
  }
};

void warm_up(const WorkloadOptions& o, const Effective& e, MemoryProbe& probe, Recorder& rec) {
  annotate_phase(Phase::kSetup, std::nullopt);
  tracer::mark_phase(Phase::kSetup, std::nullopt);
  const double before = probe.read().allocated_mib;
  {
    const auto opts = torch::TensorOptions().device(o.device).dtype(model_dtype(e.model));
    torch::Tensor x = torch::randn({64, 64}, opts).requires_grad_(true);
    torch::Tensor w = torch::randn({64, 64}, opts).requires_grad_(true);
    torch::Tensor bias = torch::randn({64}, opts).requires_grad_(true);
    // One statement each for the product's sum and its backward: a C++
    // temporary lives to the end of its statement, and Python (the Python
    // recorder's warm-up, the cross-checks') frees the product before
    // backward runs. The same requests in the same order leave the same
    // cached blocks.
    {
      const torch::Tensor s = torch::addmm(bias, x, w.t()).sum();
      s.backward();
    }
    {
      const torch::Tensor s = AddmmInBackward::apply(torch::ones({64, 64}, opts).requires_grad_(true)).sum();
      s.backward();
    }
  }
  const double after = probe.read().allocated_mib;
  rec.add_event(make_event(EventKind::kWarmup, Phase::kSetup, std::nullopt,
                           "kernel library workspaces made before the first sample (cuBLAS: one per thread; "
                           "persistent, included in every later figure)",
                           after - before));
  rec.restart_phase();
}

bool interrupted(const StopRequest* stop) { return stop != nullptr && stop->requested(); }

// at::manual_seed (ATen/Context.h) in its two halves: the accelerator's
// generators (every device's), and the CPU's.
void seed_accelerators(std::uint64_t seed) {
  const auto type = at::getAccelerator();
  if (!type) return;
  const auto devices = at::globalContext().getAcceleratorHooksInterface(type).deviceCount();
  for (c10::DeviceIndex i = 0; i < static_cast<c10::DeviceIndex>(devices); ++i) {
    at::Generator gen = at::globalContext().defaultGenerator(c10::Device(*type, i));
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_current_seed(seed);
  }
}

void seed_cpu(std::uint64_t seed) {
  at::Generator gen = at::globalContext().defaultGenerator(c10::DeviceType::CPU);
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_current_seed(seed);
}

// One run's training state, built and stepped one phase at a time; each
// method does one phase's work and records its sample. `phase` (owned by the
// caller, so it outlives this object) says where an out-of-memory error
// struck.
}  // namespace

struct ModelCache::Kept {
  std::string key;       // the model's shape, as the spec says it
  torch::Tensor before;  // the CPU generator's state before the build
  torch::Tensor after;   // ... and after it
  // Each Linear's weight and bias as built, in the model's order.
  std::vector<std::pair<torch::Tensor, torch::Tensor>> linears;
};
ModelCache::ModelCache() = default;
ModelCache::~ModelCache() { wait(); }
void ModelCache::wait() {
  if (ahead.joinable()) ahead.join();
}

namespace {

std::string model_key(const ModelSpec& m) {
  return std::to_string(m.input_dim) + "x" + std::to_string(m.hidden_dim) + "x" + std::to_string(m.output_dim) + "d" +
         std::to_string(m.depth) + "a" + std::to_string(static_cast<int>(m.activation)) + "t" +
         std::to_string(static_cast<int>(m.dtype));
}

// Builds m from the CPU generator's state now and keeps the build, with
// the states before and after it, in cache. on_device: the runs move the
// model to a device, which makes new tensors there and leaves the host's
// as built, so the kept ones are the build's own; on the CPU a run trains
// its host tensors in place, and the kept ones are copies.
torch::nn::Sequential build_and_keep(const ModelSpec& m, ModelCache& cache, bool on_device) {
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  torch::Tensor before;
  {
    HostStaging host;
    before = gen.get_state();
  }
  torch::nn::Sequential built = build_model(m);
  ++cache.builds;
  auto kept = std::make_unique<ModelCache::Kept>();
  {
    HostStaging host;
    kept->key = model_key(m);
    kept->before = before;
    kept->after = gen.get_state();
    for (const auto& child : built->children()) {
      if (auto* linear = child->as<torch::nn::LinearImpl>()) {
        kept->linears.emplace_back(on_device ? linear->weight.detach() : linear->weight.detach().clone(),
                                   on_device ? linear->bias.detach() : linear->bias.detach().clone());
      }
    }
  }
  cache.kept = std::move(kept);
  return built;
}

// The model a build from the CPU generator's state now would make, built
// or copied (memdiag/workload.hpp, ModelCache). A copy is the MLP's
// modules made at one input and output each, outside any count, then each
// Linear given a copy of the kept weight and bias in the order a build
// makes them: the same tensors asked of the allocator in the same order,
// without drawing 67 M numbers again. The generator's states and the kept
// tensors are host memory, outside a CPU run's count. on_device: as for
// build_and_keep; a run on the CPU gets copies of the kept tensors.
torch::nn::Sequential build_or_copy(const ModelSpec& m, ModelCache* cache, bool on_device) {
  if (cache == nullptr || m.kind == ModelKind::kTransformer) return build_model(m);
  cache->wait();
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  torch::Tensor now;
  {
    HostStaging host;
    now = gen.get_state();
  }
  const ModelCache::Kept* k = cache->kept.get();
  if (k != nullptr && k->key == model_key(m) && torch::equal(k->before, now)) {
    ModelSpec tiny = m;
    tiny.input_dim = tiny.hidden_dim = tiny.output_dim = 1;
    torch::nn::Sequential copy;
    {
      HostStaging host;
      copy = build_model(tiny);
    }
    std::size_t i = 0;
    torch::NoGradGuard no_grad;
    for (const auto& child : copy->children()) {
      auto* linear = child->as<torch::nn::LinearImpl>();
      if (linear == nullptr) continue;
      const auto& [weight, bias] = k->linears[i++];
      linear->weight.set_data(on_device ? weight : weight.clone());
      linear->bias.set_data(on_device ? bias : bias.clone());
    }
    gen.set_state(k->after);
    ++cache->copies;
    if (!cache->keep_builds) cache->kept.reset();  // taken: the run's model holds it now
    return copy;
  }
  if (!cache->keep_builds) return build_model(m);
  return build_and_keep(m, *cache, on_device);
}

class Training {
 public:
  Training(const WorkloadOptions& o, const Effective& e, MemoryProbe& probe, Recorder& rec, Phase& phase)
      : o_(o), e_(e), probe_(probe), rec_(rec), phase_(phase), mspec_(e.model) {}

  int micro_batches() const { return e_.micro_batches; }
  // What the micro-batch in progress is given: its samples, and tokens for
  // a transformer (set before its forward allocates anything, so a failure
  // in that forward still says it).
  std::pair<std::int64_t, std::optional<std::int64_t>> inputs() const {
    const std::int64_t n = slice(mb_).second;
    if (mspec_.kind != ModelKind::kTransformer) return {n, std::nullopt};
    return {n, n * static_cast<std::int64_t>(mspec_.sequence_length)};
  }

  void model_ready() {
    enter(Phase::kModelReady);
    // ZeRO-2/3 take the model to the device a unit at a time from where it
    // was built (host memory: on the CPU outside the simulated device);
    // tensor parallelism takes each rank's slices of it, a tensor at a time.
    const bool by_unit = o_.comm != nullptr && definition(o_.mode).shards_gradients;
    const bool split_layers = o_.comm != nullptr && definition(o_.mode).splits_layers;
    {
      std::optional<HostStaging> host;
      if (by_unit || split_layers) host.emplace();
      model_ = build_or_copy(mspec_, by_unit || split_layers ? nullptr : o_.model_cache, o_.device.is_cuda());
    }
    // The model's size as built, read from its tensors (before the move, so
    // a report of weights that did not fit the device still has it) rather
    // than from a formula that restates the architecture.
    ModelInfo& info = rec_.report().model;
    info = ModelInfo{};
    const auto element = static_cast<std::int64_t>(c10::elementSize(model_dtype(mspec_)));
    for (const torch::Tensor& p : model_->parameters()) {
      info.parameters += p.numel();
      info.parameter_bytes += static_cast<std::int64_t>(p.numel()) * element;
    }
    info.largest_module_bytes = 0;
    for (const auto& child : model_->children()) {
      std::int64_t bytes = 0;
      for (const torch::Tensor& p : child->parameters()) bytes += static_cast<std::int64_t>(p.numel()) * element;
      info.largest_module_bytes = std::max(*info.largest_module_bytes, bytes);
    }
    if (e_.autocast_bf16) info.autocast = "bfloat16";
    if (mspec_.kind == ModelKind::kTransformer) {
      info.attention = to_string(mspec_.attention);
      info.vocab = mspec_.vocab;
      info.layers = mspec_.layers;
    }
    if (split_layers) {
      tp_ = std::make_unique<TensorParallelMlp>(model_, *o_.comm,
                                                torch::TensorOptions().device(o_.device).dtype(model_dtype(mspec_)));
      info.split_parameter_bytes = tp_->split_parameter_bytes();
    } else if (by_unit) {
      shard_units();
      torch::NoGradGuard no_grad;
      // As Module::to: floating buffers take the model's dtype too.
      for (torch::Tensor b : model_->buffers()) {
        b.set_data(b.is_floating_point() ? b.to(o_.device, model_dtype(mspec_)) : b.to(o_.device));
      }
    } else {
      model_->to(o_.device, model_dtype(mspec_));
    }
    params_ = model_->parameters();
    if (o_.comm != nullptr && !by_unit && !split_layers) {
      // Every rank starts from rank 0's weights (the units broadcast theirs;
      // tensor-parallel ranks cut theirs from the same seed's whole model).
      torch::NoGradGuard no_grad;
      o_.comm->broadcast(params_, 0);
    }
    rec_.mark(Phase::kModelReady, census());
  }

  void optimizer_ready() {
    enter(Phase::kOptimizerReady);
    // ZeRO-1 shards whole parameters between the ranks; ZeRO-2/3 flat units.
    sharded_ = o_.comm != nullptr && definition(o_.mode).shards_optimizer_state && !units_;
    if (sharded_) owner_ = shard_owners(params_, o_.comm->world_size());
    std::vector<torch::Tensor> owned;
    if (units_) {
      owned = units_->shards();
    } else {
      for (std::size_t i = 0; i < params_.size(); ++i) {
        if (!sharded_ || owner_[i] == o_.comm->rank()) owned.push_back(params_[i]);
      }
    }
    optimizer_ = make_optimizer(e_.optimizer, e_.state, owned);
    rec_.mark(Phase::kOptimizerReady, census());
  }

  // Forward of micro-batch mb (0 without accumulation): the whole step's
  // batch is made at the first, as the baseline makes it, so every
  // micro-batch split trains on the same samples.
  void forward(int mb) {
    enter(Phase::kForward);
    mb_ = mb;
    if (mb == 0) {
      // This step's samples: the case's schedule may vary them by step.
      local_batch_ = o_.spec.batch_samples(o_.batch_size, rec_.current_step().value_or(0)) +
                     (o_.comm != nullptr && o_.comm->rank() == 0 ? o_.rank_zero_extra_samples : 0);
      const auto data = torch::TensorOptions().device(o_.device).dtype(model_dtype(mspec_));
      const auto labels = torch::TensorOptions().device(o_.device).dtype(torch::kLong);
      // The batch is made on the device inside the phase, as a loader's
      // host-to-device copy would be; the first Linear saves it for backward.
      if (mspec_.kind == ModelKind::kTransformer) {
        // Next-token prediction over random tokens: each sample's targets
        // are its inputs shifted by one.
        const torch::Tensor ids = torch::randint(0, mspec_.vocab, {local_batch_, mspec_.sequence_length + 1}, labels);
        x_all_ = ids.narrow(1, 0, mspec_.sequence_length);
        y_all_ = ids.narrow(1, 1, mspec_.sequence_length);
      } else {
        x_all_ = torch::randn({local_batch_, mspec_.input_dim}, data);
        y_all_ = torch::randint(0, mspec_.output_dim, {local_batch_}, labels);
      }
      step_loss_ = 0;
    }
    const auto [start, length] = slice(mb);
    x_ = accumulating() ? x_all_.narrow(0, start, length) : x_all_;
    y_ = accumulating() ? y_all_.narrow(0, start, length) : y_all_;
    {
      std::optional<AutocastGuard> cast;
      if (e_.autocast_bf16) cast.emplace(o_.device.type(), torch::kBFloat16);
      logits_ = e_.checkpoint_segments > 0 ? checkpoint_sequential(model_, e_.checkpoint_segments, x_, e_.autocast_bf16)
                : units_                     ? forward_by_unit(x_)
                : e_.split > 1               ? split_forward(x_)
                : e_.offload_activations     ? offloaded_forward(model_, mspec_.activation, x_)
                                             : forward_model(x_);
    }
    // A transformer's logits are [batch, length, vocab]: one prediction per token.
    loss_ = logits_.dim() == 3 ? torch::nn::functional::cross_entropy(
                                     logits_.to(torch::kFloat).reshape({-1, logits_.size(-1)}), y_.reshape({-1}))
                               : torch::nn::functional::cross_entropy(logits_.to(torch::kFloat), y_);
    rec_.mark(Phase::kForward, census(), micro_batch(mb));
    // A transformer's input is [batch, length] token ids; an MLP's, features.
    const bool token_ids = x_.dim() == 2 && !x_.is_floating_point();
    rec_.note_inputs(x_.size(0), token_ids ? std::optional<std::int64_t>(x_.numel()) : std::nullopt);
  }

  // split=K, as the source writes it: outputs = [model(chunk) for chunk in
  // torch.split(x, n / K)]; torch.cat(outputs). Every chunk's graph stays
  // until the one backward.
  torch::Tensor split_forward(const torch::Tensor& x) {
    const std::int64_t chunk = (x.size(0) + e_.split - 1) / e_.split;
    std::vector<torch::Tensor> outs;
    for (const torch::Tensor& c : x.split(chunk)) {
      outs.push_back(e_.offload_activations ? offloaded_forward(model_, mspec_.activation, c) : forward_model(c));
    }
    return torch::cat(outs);
  }

  // The model's own forward, or its split layers' with their all-reduces.
  torch::Tensor forward_model(const torch::Tensor& x) { return tp_ ? tp_->forward(x) : model_->forward(x); }

  void backward(int mb) {
    enter(Phase::kBackward);
    // Each micro-batch's mean loss weighted by its share of the batch: the
    // gradients add up to the whole batch's mean loss's.
    const double share = static_cast<double>(slice(mb).second) / static_cast<double>(local_batch_);
    const torch::Tensor loss = accumulating() ? loss_ * share : loss_;
    // Step 1's backward node by node (its second micro-batch's under
    // accumulation: the later micro-batches begin with every gradient
    // made, and one of them peaks), for the capacity model. Step 1, not 0:
    // step 0's backward makes what later steps find made (the autograd
    // thread's cuBLAS workspace). Not where gradients are made and reduced
    // by unit or split between ranks: the capacity model reads those runs
    // otherwise.
    std::optional<BackwardProfiler> profiler;
    if (rec_.current_step() == 1 && mb == (accumulating() ? 1 : 0) && !units_ && !tp_) {
      profiler.emplace(loss, params_, probe_, rec_);
    }
    loss.backward({}, e_.retain_graph);
    if (profiler) {
      const auto [samples, tokens] = inputs();
      rec_.report().model.backward_profile = profiler->finish(1, samples, tokens);
    }
    step_loss_ += loss_.detach().item<double>() * share;
    if (e_.keep_graph_connected_loss) kept_losses_.push_back(loss_);  // keeps every saved activation alive
    const bool last = mb + 1 == e_.micro_batches;
    if (units_) {
      // What the units' hooks have not reduce-scattered yet: the first unit
      // (no unit before it to hook), or every unit where forward ran
      // without hooks (checkpointing).
      for (std::size_t u = 0; u < units_->size(); ++u) {
        if (!reduced_[u]) units_->reduce_gradients(u);
        units_->release(u);
      }
    } else if (o_.comm != nullptr && last && !tp_) {
      // (Tensor-parallel ranks trained the same batch: nothing to average.)
      buckets_.all_reduce(params_, *o_.comm);
    }
    if (accumulating()) {
      // This micro-batch is done: what it made goes before the next one's
      // forward, as a training loop's locals would.
      x_ = y_ = logits_ = loss_ = torch::Tensor();
    }
    rec_.mark(Phase::kBackward, census(), micro_batch(mb));
  }

  void step() {
    enter(Phase::kStep);
    optimizer_->step();
    if (units_) units_->after_step();
    if (sharded_) {
      // ZeRO-1's all-gather: each shard's owner sends its updated weights.
      torch::NoGradGuard no_grad;
      for (std::size_t i = 0; i < params_.size(); ++i) {
        std::vector<torch::Tensor> one{params_[i]};
        o_.comm->broadcast(one, owner_[i]);
      }
    }
    rec_.mark(Phase::kStep, census(), std::nullopt, step_loss_);
  }

  // What training left in the weights, for comparing runs that must train
  // alike (a sharded mode against the replicated run): their sum and sum of
  // squares over the whole model, in double. Sharded units sum their
  // slices on every rank and add them up (the padding is zeros).
  //
  // Read in chunks of 2^20 elements, so that a run that ended near its
  // memory limit does not fail here; if even a chunk does not fit, the
  // figures are left out (every rank still takes part in the sum).
  void record_final_parameters() {
    torch::NoGradGuard no_grad;
    // Summed over the ranks: the units' slices, the split layers' slices.
    const std::vector<torch::Tensor> tensors = units_ ? units_->shards() : tp_ ? tp_->split_tensors() : params_;
    double sum = 0, squares = 0;
    add_sums(tensors, sum, squares);
    if (units_ || tp_) {
      torch::Tensor both = torch::tensor({sum, squares}, torch::TensorOptions().dtype(torch::kDouble).device(o_.device));
      o_.comm->all_reduce_sum(both);
      sum = both[0].item<double>();
      squares = both[1].item<double>();
    }
    // Once: the tensors every tensor-parallel rank holds whole.
    if (tp_) add_sums(tp_->whole_tensors(), sum, squares);
    if (std::isnan(sum) || std::isnan(squares)) return;
    rec_.report().model.final_parameter_sum = sum;
    rec_.report().model.final_parameter_sum_of_squares = squares;
  }

  void add_sums(const std::vector<torch::Tensor>& tensors, double& sum, double& squares) const {
    try {
      constexpr std::int64_t kChunk = std::int64_t{1} << 20;
      for (const torch::Tensor& p : tensors) {
        const torch::Tensor flat = p.detach().reshape({-1});
        for (std::int64_t at = 0; at < flat.numel(); at += kChunk) {
          const torch::Tensor d = flat.narrow(0, at, std::min(kChunk, flat.numel() - at)).to(torch::kDouble);
          sum += d.sum().item<double>();
          squares += d.dot(d).item<double>();
        }
      }
    } catch (const c10::OutOfMemoryError&) {
      sum = squares = std::numeric_limits<double>::quiet_NaN();
    }
  }

  // The tensors by role now: each phase's sample, and a failure's report.
  // Sharded units add their buffers and slices (a freed buffer counts 0).
  TensorCensus census() const {
    if (!units_) return take_census(params_, optimizer_.get());
    std::vector<torch::Tensor> all = params_;
    for (torch::Tensor& t : units_->state_tensors()) all.push_back(t);
    return take_census(all, optimizer_.get());
  }

  void cleanup() {
    enter(Phase::kCleanup);
    optimizer_->zero_grad(/*set_to_none=*/true);
    if (sharded_) {
      for (torch::Tensor& p : params_) p.mutable_grad() = torch::Tensor();  // the shards others own
    }
    // The repair of a kept loss is the step's loss read out as a logger
    // would, a detached CPU scalar (step_loss_, reported on the step sample).
    x_ = y_ = logits_ = loss_ = x_all_ = y_all_ = torch::Tensor();
    if (e_.empty_cache) empty_device_cache(o_.device);
    rec_.mark(Phase::kCleanup, census());
  }

 private:
  // ZeRO-2/3: the model's modules that hold parameters, unit_modules at a
  // time, become units in forward order.
  void shard_units() {
    std::vector<std::vector<torch::Tensor>> units;
    int in_unit = 0;
    unit_of_child_.clear();
    for (const auto& child : model_->children()) {
      std::vector<torch::Tensor> params = child->parameters();
      if (params.empty()) {
        unit_of_child_.push_back(units.empty() ? 0 : units.size() - 1);
        continue;
      }
      if (units.empty() || in_unit == o_.unit_modules) {
        units.emplace_back();
        in_unit = 0;
      }
      ++in_unit;
      for (torch::Tensor& p : params) units.back().push_back(p);
      unit_of_child_.push_back(units.size() - 1);
    }
    units_ = std::make_unique<ShardedUnits>(units, *o_.comm, definition(o_.mode).shards_parameters,
                                            torch::TensorOptions().device(o_.device).dtype(model_dtype(mspec_)));
    reduced_.assign(units_->size(), false);
    // A head tied to the token embedding reads the first unit's weight:
    // that unit is gathered with the last one, in forward and backward.
    tied_first_unit_ = mspec_.kind == ModelKind::kTransformer && mspec_.tied_embeddings && units_->size() > 1;
  }

  // Forward one unit at a time: each gathered before its first module runs
  // (with the next one too, when prefetching) and freed after its last; its
  // output's gradient hook, run when backward reaches the unit, reduces the
  // unit after it (whose backward is done: the engine accumulates a
  // parameter's gradient before any node that the same backward node
  // feeds), frees it, and gathers this one again.
  torch::Tensor forward_by_unit(torch::Tensor x) {
    std::fill(reduced_.begin(), reduced_.end(), false);
    const std::size_t children = unit_of_child_.size();
    std::size_t i = 0;
    for (auto& child : *model_) {
      const std::size_t u = unit_of_child_[i];
      const bool first = i == 0 || unit_of_child_[i - 1] != u;
      const bool last = i + 1 == children || unit_of_child_[i + 1] != u;
      if (first) {
        units_->gather(u);
        if (tied_first_unit_ && u + 1 == units_->size()) units_->gather(0);
        if (o_.prefetch_next && u + 1 < units_->size()) units_->gather(u + 1);
      }
      x = child.forward(x);
      if (last) {
        if (x.requires_grad()) {
          x.register_hook([this, u](const torch::Tensor& grad) {
            before_unit_backward(u);
            return grad;
          });
        }
        units_->release(u);
        if (tied_first_unit_ && u + 1 == units_->size()) units_->release(0);
      }
      ++i;
    }
    return x;
  }

  void before_unit_backward(std::size_t u) {
    if (u + 1 < units_->size() && !reduced_[u + 1]) {
      units_->reduce_gradients(u + 1);
      reduced_[u + 1] = true;
      units_->release(u + 1);
    }
    units_->gather(u);
    if (tied_first_unit_ && u + 1 == units_->size()) units_->gather(0);  // kept until backward ends
    if (o_.prefetch_next && u > 0) units_->gather(u - 1);
  }

  // A phase begins: where an out-of-memory error would strike, and a mark
  // in the allocator's history when a snapshot is being recorded.
  void enter(Phase p) {
    phase_ = p;
    annotate_phase(p, rec_.current_step());
    tracer::mark_phase(p, rec_.current_step());
  }
  bool accumulating() const { return e_.micro_batches > 1; }
  std::optional<int> micro_batch(int mb) const { return accumulating() ? std::optional<int>(mb) : std::nullopt; }
  // Micro-batch mb's first sample and length: sizes differ by at most one.
  std::pair<std::int64_t, std::int64_t> slice(int mb) const {
    const std::int64_t k = e_.micro_batches, n = local_batch_;
    const std::int64_t base = n / k, extra = n % k;
    const std::int64_t start = mb * base + std::min<std::int64_t>(mb, extra);
    return {start, base + (mb < extra ? 1 : 0)};
  }

  const WorkloadOptions& o_;
  const Effective& e_;
  MemoryProbe& probe_;
  Recorder& rec_;
  Phase& phase_;
  const ModelSpec& mspec_;  // the case's, with the remedies' dtype
  torch::nn::Sequential model_{nullptr};
  std::vector<torch::Tensor> params_;
  bool sharded_ = false;
  std::vector<int> owner_;  // the rank that owns each parameter's optimizer state (ZeRO-1)
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  GradientBuckets buckets_;
  std::unique_ptr<ShardedUnits> units_;     // ZeRO-2/3
  std::unique_ptr<TensorParallelMlp> tp_;   // --parallel=tensor
  std::vector<std::size_t> unit_of_child_;  // the unit each of the model's modules runs in
  std::vector<bool> reduced_;               // units whose gradients this backward has reduce-scattered
  bool tied_first_unit_ = false;            // the last unit reads the first unit's weight (a tied head)
  std::int64_t local_batch_ = 0;
  int mb_ = 0;  // the micro-batch in progress
  torch::Tensor x_all_, y_all_;             // the step's batch
  torch::Tensor x_, y_, logits_, loss_;     // the (micro-)batch in progress
  double step_loss_ = 0;                    // the step's mean loss, as a logger reads it
  std::vector<torch::Tensor> kept_losses_;  // gamma's leak lives here when asked for
};

}  // namespace

RunStatus run_workload(const WorkloadOptions& given, MemoryProbe& probe, Recorder& rec,
                       const StopRequest* interrupt) {
  // The batch may come after setup (await_batch): Training reads it here.
  WorkloadOptions o = given;
  // Seeded as torch::manual_seed seeds, in two halves: a CUDA run's model
  // may still be being built ahead on the host (build_model_ahead), with
  // the CPU's generator, while the warm-up draws from the device's; the
  // CPU's is seeded once that build is done. Every generator ends where
  // torch::manual_seed before the warm-up leaves it.
  seed_accelerators(o.seed);
  const auto seed_host = [&] {
    if (given.model_cache != nullptr) given.model_cache->wait();
    seed_cpu(o.seed);
  };
  const bool warm_up_first = o.device.is_cuda();
  if (!warm_up_first) seed_host();
  const Effective e = effective(o);
  Phase phase = Phase::kSetup;
  // The last phase's scope in the allocator's history ends with the run.
  struct EndAnnotation {
    ~EndAnnotation() { end_phase_annotation(); }
  } end_annotation;
  std::optional<TensorCensus> at_failure;  // the census when a phase ran out of memory
  std::optional<std::pair<std::int64_t, std::optional<std::int64_t>>> inputs_at_failure;
  try {
    if (o.warm_up_kernels) warm_up(o, e, probe, rec);
    if (warm_up_first) seed_host();
    if (e.empty_cache && !o.device.is_cuda()) {
      rec.add_event(make_event(EventKind::kNote, Phase::kSetup, std::nullopt,
                          "empty-cache: not applicable on the CPU (no caching allocator to empty)", std::nullopt));
    }
    Training t(o, e, probe, rec, phase);
    // Runs one phase; if it runs out of memory, what the tensors held then
    // is kept for the report before the training state goes.
    auto attempt = [&](auto&& work) {
      try {
        work();
      } catch (const c10::OutOfMemoryError&) {
        if (phase != Phase::kModelReady) at_failure = t.census();
        if (phase == Phase::kForward || phase == Phase::kBackward) inputs_at_failure = t.inputs();
        throw;
      }
      return !interrupted(interrupt);
    };
    if (!attempt([&] { t.model_ready(); }) || !attempt([&] { t.optimizer_ready(); })) return RunStatus::kInterrupted;
    if (o.await_batch) {
      // Nothing made so far depends on the batch: the data is drawn in
      // forward. The wait is no phase's time.
      const std::optional<int> batch = o.await_batch();
      if (!batch || interrupted(interrupt)) return RunStatus::kInterrupted;
      o.batch_size = *batch;
      rec.report().config.batch_size_per_device = *batch;
      rec.restart_phase();
    }
    for (int step = 0; step < o.steps; ++step) {
      rec.begin_step(step);
      for (int mb = 0; mb < t.micro_batches(); ++mb) {
        if (!attempt([&] { t.forward(mb); }) || !attempt([&] { t.backward(mb); })) return RunStatus::kInterrupted;
      }
      if (!attempt([&] { t.step(); }) || !attempt([&] { t.cleanup(); })) return RunStatus::kInterrupted;
    }
    t.record_final_parameters();
    return RunStatus::kComplete;
  } catch (const c10::OutOfMemoryError& error) {
    std::string msg = error.what_without_backtrace();
    const auto nl = msg.find('\n');
    if (nl != std::string::npos) msg.resize(nl);
    // The training state is gone by now; the peak of the failing phase is
    // still in the counters and tells how far the phase got.
    Event event = make_event(EventKind::kOom, phase, rec.current_step(), msg,
                             std::max(probe.read().peak_allocated_mib, rec.carried_peak_mib()));
    event.oom = probe.take_oom_details().value_or(OomDetails{});
    event.oom->tensors = at_failure;
    if (inputs_at_failure) {
      event.oom->samples = inputs_at_failure->first;
      event.oom->tokens = inputs_at_failure->second;
    }
    rec.add_event(std::move(event));
    return RunStatus::kOom;
  }
}

bool build_model_ahead(const WorkloadOptions& o, ModelCache& cache) {
  if (o.comm != nullptr) return false;
  ModelSpec m;
  try {
    m = effective(o).model;
  } catch (const std::exception&) {
    return false;  // the run says what is wrong with it
  }
  if (m.kind == ModelKind::kTransformer) return false;
  cache.wait();
  cache.ahead = std::thread([&cache, m, seed = o.seed] {
    try {
      seed_cpu(seed);  // as run_workload seeds it
      (void)build_and_keep(m, cache, /*on_device=*/true);
    } catch (...) {
      cache.kept.reset();  // the run builds its own, and meets what failed here itself
    }
  });
  return true;
}

}  // namespace memdiag
