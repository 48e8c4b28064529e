#include "memdiag/checkpoint.hpp"

#include "memdiag/autocast_guard.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <ATen/core/Generator.h>
#include <torch/autograd.h>
#include <torch/custom_class.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <mutex>

namespace memdiag {
namespace {

// What a checkpointed segment needs again in backward, kept alive by the
// graph node that holds it (ctx->saved_data), so it goes with the graph.
struct Segment : torch::CustomClassHolder {
  std::function<torch::Tensor(const torch::Tensor&)> run;
  c10::Device device = c10::Device(c10::DeviceType::CPU);
  bool autocast_bf16 = false;
  // The generators' states when forward ran, for a recomputation that draws
  // the same random numbers (dropout, say).
  torch::Tensor cpu_rng;
  torch::Tensor device_rng;
};

torch::Tensor rng_state(at::Generator g) {
  std::lock_guard<std::mutex> lock(g.mutex());
  return g.get_state();
}
void set_rng_state(at::Generator g, const torch::Tensor& state) {
  std::lock_guard<std::mutex> lock(g.mutex());
  g.set_state(state);
}

// Runs `body` with the generators set to the forward's states, and puts the
// states of now back afterwards (PyTorch's fork_rng).
template <typename Body>
auto with_forward_rng(const Segment& s, Body body) {
  at::Generator cpu = at::detail::getDefaultCPUGenerator();
  const torch::Tensor cpu_now = rng_state(cpu);
  std::optional<at::Generator> dev;
  torch::Tensor dev_now;
  if (s.device.is_cuda()) {
    dev = at::globalContext().defaultGenerator(s.device);
    dev_now = rng_state(*dev);
    set_rng_state(*dev, s.device_rng);
  }
  set_rng_state(cpu, s.cpu_rng);
  auto result = body();
  set_rng_state(cpu, cpu_now);
  if (dev) set_rng_state(*dev, dev_now);
  return result;
}

// The parameters are inputs of the Function, not only of the segment: were
// they not, a segment whose input needs no gradient (the first, fed with
// data) would give an output that needs none, and its parameters' gradients
// would silently never be computed.
class CheckpointFunction : public torch::autograd::Function<CheckpointFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               c10::intrusive_ptr<Segment> segment, at::TensorList params) {
    segment->cpu_rng = rng_state(at::detail::getDefaultCPUGenerator());
    if (segment->device.is_cuda()) segment->device_rng = rng_state(at::globalContext().defaultGenerator(segment->device));
    // The input and references to the parameters (no copies) are all that
    // is kept; autograd runs this with grad mode off.
    std::vector<torch::Tensor> saved{x};
    saved.insert(saved.end(), params.begin(), params.end());
    ctx->save_for_backward(saved);
    ctx->saved_data["segment"] = c10::IValue::make_capsule(segment);
    return segment->run(x);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    auto segment = c10::static_intrusive_pointer_cast<Segment>(ctx->saved_data["segment"].toCapsule());
    const torch::autograd::variable_list saved = ctx->get_saved_variables();
    const torch::Tensor& x = saved[0];
    torch::Tensor input = x.detach().requires_grad_(x.requires_grad());
    torch::Tensor out = with_forward_rng(*segment, [&] {
      torch::AutoGradMode grad(true);
      std::optional<AutocastGuard> cast;
      if (segment->autocast_bf16) cast.emplace(segment->device.type(), at::kBFloat16);
      return segment->run(input);
    });
    // Gradients for the segment's input (when it needs one) and parameters,
    // returned to the engine, which accumulates them as for any other node.
    std::vector<torch::Tensor> wrt;
    if (input.requires_grad()) wrt.push_back(input);
    const std::size_t first_param = wrt.size();
    wrt.insert(wrt.end(), saved.begin() + 1, saved.end());
    const torch::autograd::variable_list grads =
        torch::autograd::grad({out}, wrt, {grad_outputs[0]}, /*retain_graph=*/false, /*create_graph=*/false,
                              /*allow_unused=*/true);
    torch::autograd::variable_list result;
    result.push_back(input.requires_grad() ? grads[0] : torch::Tensor());
    result.push_back(torch::Tensor());  // the segment holder is no tensor
    for (std::size_t i = first_param; i < grads.size(); ++i) result.push_back(grads[i]);
    return result;
  }
};

std::vector<torch::Tensor> params_of(torch::nn::Sequential& seq, std::size_t begin, std::size_t end) {
  std::vector<torch::Tensor> out;
  auto it = seq->begin() + static_cast<std::ptrdiff_t>(begin);
  for (std::size_t i = begin; i < end; ++i, ++it) {
    for (const torch::Tensor& p : it->ptr()->parameters()) out.push_back(p);
  }
  return out;
}

}  // namespace

torch::Tensor run_modules(torch::nn::Sequential& seq, std::size_t begin, std::size_t end, torch::Tensor x) {
  auto it = seq->begin() + static_cast<std::ptrdiff_t>(begin);
  for (std::size_t i = begin; i < end; ++i, ++it) x = it->forward(x);
  return x;
}

torch::Tensor checkpoint_sequential(torch::nn::Sequential& seq, int segments, const torch::Tensor& input,
                                    bool autocast_bf16) {
  const std::size_t n = seq->size();
  const std::size_t count = std::max<std::size_t>(1, std::min<std::size_t>(static_cast<std::size_t>(segments), n));
  const std::size_t size = n / count;
  torch::Tensor x = input;
  std::size_t start = 0;
  // As PyTorch: segments - 1 checkpointed pieces of `size` modules, then
  // the rest run normally.
  for (std::size_t k = 0; k + 1 < count; ++k, start += size) {
    auto segment = c10::make_intrusive<Segment>();
    const std::size_t begin = start, end = start + size;
    segment->run = [seq, begin, end](const torch::Tensor& in) mutable { return run_modules(seq, begin, end, in); };
    segment->device = input.device();
    segment->autocast_bf16 = autocast_bf16;
    // As an at::TensorList: autograd counts the tensors of a TensorList
    // argument as inputs, but not those of a std::vector, which would make
    // the parameters invisible again.
    const std::vector<torch::Tensor> params = params_of(seq, begin, end);
    x = CheckpointFunction::apply(x, segment, at::TensorList(params));
  }
  return run_modules(seq, start, n, x);
}

}  // namespace memdiag
