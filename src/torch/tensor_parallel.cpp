#include "tensor_parallel.hpp"

#include <ATen/ops/linear.h>
#include <torch/autograd.h>
#include <torch/nn/modules/linear.h>
#include <torch/utils.h>

#include <cstdint>

namespace memdiag {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

Communicator* communicator(AutogradContext* ctx) {
  return reinterpret_cast<Communicator*>(ctx->saved_data["comm"].toInt());
}

// Megatron's f, before a column-parallel layer: the input as it is in
// forward; in backward the ranks' parts of its gradient summed (each rank's
// slice of the layer contributes its part of every input feature's
// gradient).
class CopyToRanks : public torch::autograd::Function<CopyToRanks> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, Communicator* comm) {
    ctx->saved_data["comm"] = reinterpret_cast<std::int64_t>(comm);
    return x;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    torch::Tensor g = grads[0].contiguous();
    communicator(ctx)->all_reduce_sum(g);
    return {g, torch::Tensor()};
  }
};

// Megatron's g, after a row-parallel layer: the ranks' partial outputs
// summed in place (the matrix product's result, which nothing saved); in
// backward the gradient as it is, since every rank's partial output added
// to the sum with weight one.
class ReduceFromRanks : public torch::autograd::Function<ReduceFromRanks> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor partial, Communicator* comm) {
    ctx->mark_dirty({partial});
    comm->all_reduce_sum(partial);
    return partial;
  }
  static variable_list backward(AutogradContext*, variable_list grads) { return {grads[0], torch::Tensor()}; }
};

}  // namespace

TensorParallelMlp::TensorParallelMlp(torch::nn::Sequential model, Communicator& comm, const torch::TensorOptions& target)
    : model_(std::move(model)), comm_(comm) {
  torch::NoGradGuard no_grad;
  const std::int64_t n = comm.world_size(), r = comm.rank();
  const auto element = static_cast<std::int64_t>(target.dtype().itemsize());
  // Each kept tensor copied onto the target in turn; the whole host tensor
  // goes when the parameter lets go of it.
  auto keep = [&](torch::Tensor& p, const torch::Tensor& part, bool split) {
    torch::Tensor mine = torch::empty(part.sizes(), target.requires_grad(false));
    mine.copy_(part);
    if (split) split_bytes_ += p.numel() * element;
    p.set_data(mine);
    (split ? split_ : whole_).push_back(p);
  };
  int linears = 0;
  for (const auto& child : model_->children()) linears += child->as<torch::nn::LinearImpl>() != nullptr ? 1 : 0;
  int seen = 0;
  for (const auto& child : model_->children()) {
    auto* linear = child->as<torch::nn::LinearImpl>();
    if (linear == nullptr) {
      // An activation, elementwise: it runs on whatever slice it is given.
      // Anything else holding parameters would be kept whole.
      for (torch::Tensor p : child->parameters()) keep(p, p, false);
      roles_.push_back(Role::kOther);
      continue;
    }
    const bool paired = seen / 2 < linears / 2;  // an odd last Linear has no partner
    const bool column = paired && seen % 2 == 0;
    ++seen;
    if (!paired) {
      keep(linear->weight, linear->weight, false);
      keep(linear->bias, linear->bias, false);
      roles_.push_back(Role::kOther);
    } else if (column) {
      // The plan refuses a width the ranks do not divide
      // (tensor_parallel_refusal); a caller past it would lose features.
      TORCH_CHECK(linear->weight.size(0) % n == 0, "tensor parallel: ", n, " ranks do not divide ",
                  linear->weight.size(0), " output features");
      const std::int64_t rows = linear->weight.size(0) / n;
      keep(linear->weight, linear->weight.narrow(0, r * rows, rows), true);
      keep(linear->bias, linear->bias.narrow(0, r * rows, rows), true);
      roles_.push_back(Role::kColumn);
    } else {
      const std::int64_t cols = linear->weight.size(1) / n;
      keep(linear->weight, linear->weight.narrow(1, r * cols, cols), true);
      keep(linear->bias, linear->bias, false);
      roles_.push_back(Role::kRow);
    }
  }
}

torch::Tensor TensorParallelMlp::forward(torch::Tensor x) {
  std::size_t i = 0;
  for (auto& child : *model_) {
    switch (roles_[i++]) {
      case Role::kColumn: x = child.forward(CopyToRanks::apply(x, &comm_)); break;
      case Role::kRow: {
        const auto* linear = child.ptr()->as<torch::nn::LinearImpl>();
        // The bias in the partial sum's dtype: under autocast the product is
        // bf16, and an fp32 bias would promote the layer's output (and all
        // that follows) to fp32, where one process's Linear gives bf16.
        const torch::Tensor partial = ReduceFromRanks::apply(at::linear(x, linear->weight), &comm_);
        x = partial + linear->bias.to(partial.scalar_type());
        break;
      }
      case Role::kOther: x = child.forward(x); break;
    }
  }
  return x;
}

}  // namespace memdiag
