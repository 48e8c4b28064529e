#include "tensor_parallel.hpp"

#include <ATen/ops/linear.h>
#include <torch/autograd.h>
#include <torch/nn/modules/linear.h>
#include <torch/utils.h>

#include <cstdint>

namespace memdiag {

std::optional<std::string> tensor_parallel_refusal(const std::string& case_name, const std::string& preset,
                                                   const ModelSpec& m, const std::vector<Remedy>& remedies,
                                                   std::optional<int> world, int rank_zero_extra_samples) {
  const std::string flag = "--parallel=tensor: ";
  if (!world) {
    return flag + "splits each layer pair across the ranks of a job; start it under a launcher "
                  "(torchrun --nproc-per-node=N --no-python memory_diagnostics ...)";
  }
  if (rank_zero_extra_samples > 0) {
    return flag + "not with --rank-zero-extra-samples (every tensor-parallel rank trains the same batch)";
  }
  if (m.kind == ModelKind::kTransformer) {
    return flag + case_name + " is a transformer; tensor parallelism is implemented for a model that is an MLP "
                              "(its Linear layers split in pairs)";
  }
  if (m.hidden_dim % *world != 0) {
    return flag + case_name + " preset " + preset + " has hidden width " + std::to_string(m.hidden_dim) +
           ", which " + std::to_string(*world) + " ranks do not divide (each holds hidden/N features of every "
           "split layer); run it over a world size that divides " + std::to_string(m.hidden_dim);
  }
  for (const Remedy& r : remedies) {
    const char* why = nullptr;
    switch (r.kind) {
      case RemedyKind::kCheckpoint:
        why = "recomputes the model's modules inside backward, past the split layers' all-reduces";
        break;
      case RemedyKind::kOffloadActivations:
        why = "runs the model's layers itself to save their tensors on the host, past the split layers' all-reduces";
        break;
      case RemedyKind::kAdafactor:
        why = "factors each weight matrix's second moment into its row and column means, which a slice of the "
              "matrix does not have";
        break;
      case RemedyKind::kAccumulate:
      case RemedyKind::kBf16:
      case RemedyKind::kAutocastBf16:
      case RemedyKind::kEmptyCache:
      case RemedyKind::kFixGraph:
      case RemedyKind::kSgd:
      case RemedyKind::kEfficientAttention:
      case RemedyKind::kStateBf16:
      case RemedyKind::kState8bit:
      case RemedyKind::kOffloadState:
      case RemedyKind::kSplit:
      case RemedyKind::kExpandableSegments:
      case RemedyKind::kMaxSplit:
      case RemedyKind::kGcThreshold:
      case RemedyKind::kRoundupPow2: break;
    }
    if (why != nullptr) {
      return flag + "not with --remedy " + to_string(r.kind) + " (it " + why +
             "); the other remedies, accumulate and split among them, combine with it";
    }
  }
  return std::nullopt;
}

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
        x = ReduceFromRanks::apply(at::linear(x, linear->weight), &comm_) + linear->bias;
        break;
      }
      case Role::kOther: x = child.forward(x); break;
    }
  }
  return x;
}

}  // namespace memdiag
