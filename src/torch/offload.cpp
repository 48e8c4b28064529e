#include "offload.hpp"

#include "memdiag/tracking_allocator.hpp"

#include <ATen/ATen.h>
#include <torch/autograd.h>
#include <torch/nn/modules/linear.h>

namespace memdiag {
namespace {

// A copy of t in host memory: pinned and copied without waiting where t is
// on CUDA; on the CPU, outside the simulated device's count (HostStaging).
torch::Tensor to_host(const torch::Tensor& t) {
  if (t.is_cuda()) {
    torch::Tensor h = at::empty(t.sizes(), t.options().device(torch::kCPU).pinned_memory(true));
    h.copy_(t, /*non_blocking=*/true);
    return h;
  }
  HostStaging host;
  return t.clone();
}

torch::Tensor to_device(const torch::Tensor& h, const torch::Tensor& like) {
  if (like.is_cuda()) return h.to(like.device(), /*non_blocking=*/true);
  return h.clone();
}

// y = x W^T + b (addmm, as Linear's forward on a matrix), with x kept on the
// host. Backward is AddmmBackward0's for a transposed weight: dx = g W,
// dW = g^T x, db = g summed to b's shape.
class OffloadedLinear : public torch::autograd::Function<OffloadedLinear> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& w,
                               const torch::Tensor& b) {
    ctx->saved_data["x"] = to_host(x);
    ctx->saved_data["device_like"] = at::empty({0}, x.options());
    ctx->save_for_backward({w});
    return at::addmm(b, x, w.t());
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const torch::Tensor w = ctx->get_saved_variables()[0];
    const torch::Tensor& g = grads[0];
    const torch::Tensor x = to_device(ctx->saved_data["x"].toTensor(), ctx->saved_data["device_like"].toTensor());
    torch::Tensor dx = g.mm(w);
    torch::Tensor dw = g.t().mm(x);
    torch::Tensor db = at::sum_to(g, w.sizes().slice(0, 1));
    return {dx, dw, db};
  }
};

// The activation with what its backward reads kept on the host: ReLU's and
// tanh's output, GELU's input.
class OffloadedActivation : public torch::autograd::Function<OffloadedActivation> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& z, int64_t kind) {
    const auto a = static_cast<Activation>(kind);
    torch::Tensor out = a == Activation::kRelu ? at::relu(z) : a == Activation::kTanh ? at::tanh(z) : at::gelu(z);
    ctx->saved_data["kind"] = kind;
    ctx->saved_data["kept"] = to_host(a == Activation::kGelu ? z : out);
    ctx->saved_data["device_like"] = at::empty({0}, z.options());
    return out;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto a = static_cast<Activation>(ctx->saved_data["kind"].toInt());
    const torch::Tensor kept = to_device(ctx->saved_data["kept"].toTensor(), ctx->saved_data["device_like"].toTensor());
    const torch::Tensor& g = grads[0];
    torch::Tensor dz = a == Activation::kRelu   ? at::threshold_backward(g, kept, 0)
                       : a == Activation::kTanh ? at::tanh_backward(g, kept)
                                                : at::gelu_backward(g, kept);
    return {dz, torch::Tensor()};
  }
};

}  // namespace

torch::Tensor offloaded_forward(torch::nn::Sequential& seq, Activation activation, const torch::Tensor& input) {
  torch::Tensor x = input;
  for (const auto& child : seq->children()) {
    if (auto* linear = child->as<torch::nn::LinearImpl>()) {
      x = OffloadedLinear::apply(x, linear->weight, linear->bias);
    } else {
      x = OffloadedActivation::apply(x, static_cast<int64_t>(activation));
    }
  }
  return x;
}

}  // namespace memdiag
