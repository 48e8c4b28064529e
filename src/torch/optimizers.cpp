#include "optimizers.hpp"

#include "memdiag/tracking_allocator.hpp"

#include <ATen/ATen.h>
#include <torch/utils.h>

#include <cmath>
#include <limits>

namespace memdiag {
namespace {

constexpr std::int64_t kBlock = 256;

// x flattened and padded with zeros to whole blocks, blocks x 256.
torch::Tensor blocks_of(const torch::Tensor& x) {
  const std::int64_t n = x.numel();
  const std::int64_t nb = (n + kBlock - 1) / kBlock;
  torch::Tensor flat = x.reshape({-1});
  if (nb * kBlock != n) flat = at::constant_pad_nd(flat, {0, nb * kBlock - n}, 0);
  return flat.view({nb, kBlock});
}

torch::Tensor unblock(const torch::Tensor& blocks, const torch::Tensor& like) {
  return blocks.reshape({-1}).narrow(0, 0, like.numel()).view(like.sizes());
}

}  // namespace

// A value v of a block whose largest magnitude is s is kept as
// round(levels * sqrt(|v| / s)), signed: code c gives back s * (c / levels)^2.
Blockwise8bit quantize_signed(const torch::Tensor& x) {
  const torch::Tensor b = blocks_of(x.to(torch::kFloat32));
  torch::Tensor scales = b.abs().amax(1);
  const torch::Tensor safe = scales.clamp_min(std::numeric_limits<float>::min()).unsqueeze(1);
  torch::Tensor codes = (b.abs() / safe).sqrt_().mul_(127).round_().mul_(b.sign()).clamp_(-127, 127).to(torch::kInt8);
  return {codes, scales};
}

torch::Tensor dequantize_signed(const Blockwise8bit& q, const torch::Tensor& like) {
  torch::Tensor c = q.codes.to(torch::kFloat32).div_(127);
  return unblock(c.abs().mul(c).mul_(q.scales.unsqueeze(1)), like);
}

// The second moment spans the square of the first's range: kept as its
// square root, companded the same way, so a value is lost to zero only far
// below where the first moment's would be (v / max below (0.5/255)^4).
Blockwise8bit quantize_unsigned(const torch::Tensor& x) {
  const torch::Tensor b = blocks_of(x.to(torch::kFloat32)).sqrt();
  torch::Tensor scales = b.amax(1);
  const torch::Tensor safe = scales.clamp_min(std::numeric_limits<float>::min()).unsqueeze(1);
  torch::Tensor codes = (b / safe).sqrt_().mul_(255).round_().clamp_(0, 255).to(torch::kUInt8);
  return {codes, scales};
}

torch::Tensor dequantize_unsigned(const Blockwise8bit& q, const torch::Tensor& like) {
  torch::Tensor c = q.codes.to(torch::kFloat32).div_(255);
  torch::Tensor root = c.mul(c).mul_(q.scales.unsqueeze(1));
  return unblock(root.mul_(root), like);
}

std::vector<torch::Tensor> CompactAdamState::all() const {
  return {exp_avg, exp_avg_sq, avg_codes, avg_scales, avg_sq_codes, avg_sq_scales, host_weight};
}

std::vector<torch::Tensor> CompactAdamState::device_tensors() const {
  if (on_host) return {};
  return all();
}

std::vector<torch::Tensor> CompactAdamState::host_tensors() const {
  if (!on_host) return {};
  return all();
}

CompactAdam::CompactAdam(std::vector<torch::Tensor> params, CompactAdamOptions options)
    : torch::optim::Optimizer({torch::optim::OptimizerParamGroup(std::move(params))},
                              std::make_unique<CompactAdamOptions>(options)) {}

namespace {

// Host memory for an offloaded state: pinned where CUDA copies from it, and
// on the CPU outside the simulated device's count (HostStaging).
torch::Tensor host_zeros_like(const torch::Tensor& p) {
  HostStaging host;
  auto opts = p.options().device(torch::kCPU).dtype(torch::kFloat32);
  if (p.is_cuda()) opts = opts.pinned_memory(true);
  return torch::zeros(p.sizes(), opts);
}

// The closure's loss, with gradients on (as torch::optim's own steps do).
torch::Tensor evaluate(const torch::optim::Optimizer::LossClosure& closure) {
  if (closure == nullptr) return {};
  at::AutoGradMode enable_grad(true);
  return closure();
}

}  // namespace

torch::Tensor CompactAdam::step(LossClosure closure) {
  torch::NoGradGuard no_grad;
  torch::Tensor loss = evaluate(closure);
  for (auto& group : param_groups_) {
    auto& o = static_cast<CompactAdamOptions&>(group.options());
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      auto it = state_.find(p.unsafeGetTensorImpl());
      if (it == state_.end()) {
        auto s = std::make_unique<CompactAdamState>();
        s->on_host = o.on_host();
        if (o.on_host()) {
          s->exp_avg = host_zeros_like(p);
          s->exp_avg_sq = host_zeros_like(p);
          s->host_weight = host_zeros_like(p);
          HostStaging host;
          s->host_weight.copy_(p);
        } else {
          switch (o.format()) {
            case MomentFormat::kFp32:
              s->exp_avg = torch::zeros_like(p, at::MemoryFormat::Preserve);
              s->exp_avg_sq = torch::zeros_like(p, at::MemoryFormat::Preserve);
              break;
            case MomentFormat::kBf16:
              s->exp_avg = torch::zeros_like(p, p.options().dtype(torch::kBFloat16));
              s->exp_avg_sq = torch::zeros_like(p, p.options().dtype(torch::kBFloat16));
              break;
            case MomentFormat::kBlockwise8bit: {
              const Blockwise8bit m = quantize_signed(torch::zeros_like(p)), v = quantize_unsigned(torch::zeros_like(p));
              s->avg_codes = m.codes;
              s->avg_scales = m.scales;
              s->avg_sq_codes = v.codes;
              s->avg_sq_scales = v.scales;
              break;
            }
          }
        }
        it = state_.emplace(p.unsafeGetTensorImpl(), std::move(s)).first;
      }
      auto& s = static_cast<CompactAdamState&>(*it->second);
      // Where the update is made: the weights themselves, or their host copy
      // (the gradient brought there); the moments as fp32 tensors there.
      torch::Tensor w = s.on_host ? s.host_weight : p;
      std::optional<HostStaging> host;
      if (s.on_host) host.emplace();
      torch::Tensor grad = s.on_host ? p.grad().to(torch::kCPU, torch::kFloat32) : p.grad();
      if (o.decoupled()) {
        if (o.weight_decay() != 0) w.mul_(1 - o.lr() * o.weight_decay());
      } else if (o.weight_decay() != 0) {
        grad = grad.add(w, o.weight_decay());
      }
      torch::Tensor exp_avg, exp_avg_sq;
      switch (s.on_host ? MomentFormat::kFp32 : o.format()) {
        case MomentFormat::kFp32:
          exp_avg = s.exp_avg;
          exp_avg_sq = s.exp_avg_sq;
          break;
        case MomentFormat::kBf16:
          exp_avg = s.exp_avg.to(torch::kFloat32);
          exp_avg_sq = s.exp_avg_sq.to(torch::kFloat32);
          break;
        case MomentFormat::kBlockwise8bit:
          exp_avg = dequantize_signed({s.avg_codes, s.avg_scales}, w);
          // A second moment rounded below the first's square would let one
          // value's step run away (the first kept, the second lost to zero):
          // it is never taken below that square.
          exp_avg_sq = torch::maximum(dequantize_unsigned({s.avg_sq_codes, s.avg_sq_scales}, w), exp_avg * exp_avg);
          break;
      }
      // As LibTorch's Adam and AdamW, operation for operation.
      s.step += 1;
      const double bias_correction1 = 1 - std::pow(o.beta1(), s.step);
      const double bias_correction2 = 1 - std::pow(o.beta2(), s.step);
      exp_avg.mul_(o.beta1()).add_(grad, 1 - o.beta1());
      exp_avg_sq.mul_(o.beta2()).addcmul_(grad, grad, 1 - o.beta2());
      torch::Tensor denom = (exp_avg_sq.sqrt() / std::sqrt(bias_correction2)).add_(o.eps());
      w.addcdiv_(exp_avg, denom, -o.lr() / bias_correction1);
      switch (s.on_host ? MomentFormat::kFp32 : o.format()) {
        case MomentFormat::kFp32: break;
        case MomentFormat::kBf16:
          s.exp_avg.copy_(exp_avg);
          s.exp_avg_sq.copy_(exp_avg_sq);
          break;
        case MomentFormat::kBlockwise8bit: {
          const Blockwise8bit m = quantize_signed(exp_avg), v = quantize_unsigned(exp_avg_sq);
          s.avg_codes.copy_(m.codes);
          s.avg_scales.copy_(m.scales);
          s.avg_sq_codes.copy_(v.codes);
          s.avg_sq_scales.copy_(v.scales);
          break;
        }
      }
      host.reset();
      if (s.on_host) p.copy_(s.host_weight);
    }
  }
  return loss;
}

std::vector<torch::Tensor> AdafactorState::device_tensors() const { return {row_var, col_var, variance}; }

Adafactor::Adafactor(std::vector<torch::Tensor> params, AdafactorOptions options)
    : torch::optim::Optimizer({torch::optim::OptimizerParamGroup(std::move(params))},
                              std::make_unique<AdafactorOptions>(options)) {}

// torch/optim/_adafactor.py, _single_tensor_adafactor (torch 2.11), in its
// order: the step's coefficients as Python floats, the factors' means by
// norms, lerp, the estimate clamped by eps1 squared, the update clipped.
torch::Tensor Adafactor::step(LossClosure closure) {
  torch::NoGradGuard no_grad;
  torch::Tensor loss = evaluate(closure);
  for (auto& group : param_groups_) {
    auto& o = static_cast<AdafactorOptions&>(group.options());
    for (auto& param : group.params()) {
      if (!param.grad().defined()) continue;
      const torch::Tensor& grad = param.grad();
      auto it = state_.find(param.unsafeGetTensorImpl());
      if (it == state_.end()) {
        auto s = std::make_unique<AdafactorState>();
        if (grad.dim() > 1) {
          std::vector<std::int64_t> row = grad.sizes().vec(), col = grad.sizes().vec();
          row.back() = 1;
          col[col.size() - 2] = 1;
          s->row_var = grad.new_zeros(row);
          s->col_var = grad.new_zeros(col);
        } else {
          s->variance = torch::zeros_like(grad, at::MemoryFormat::Preserve);
        }
        it = state_.emplace(param.unsafeGetTensorImpl(), std::move(s)).first;
      }
      auto& s = static_cast<AdafactorState&>(*it->second);
      const double eps1 = param.scalar_type() == torch::kBFloat16 ? 0.0078125 : std::numeric_limits<float>::epsilon();
      s.step += 1;
      // The step is a float32 tensor in torch: .item() of it.
      const double step = static_cast<double>(static_cast<float>(s.step));
      const double one_minus_beta2 = std::pow(step, o.beta2_decay());
      const double rho = std::min(o.lr(), 1 / std::pow(step, 0.5));
      const double alpha =
          std::max(o.eps2(), at::linalg_vector_norm(param, 2).item<double>() / std::pow(static_cast<double>(param.numel()), 0.5)) *
          rho;
      if (o.weight_decay() != 0) param.mul_(1 - o.lr() * o.weight_decay());
      torch::Tensor var_estimate;
      if (grad.dim() > 1) {
        torch::Tensor row_mean = at::linalg_vector_norm(grad, 2, {-1}, true).square_().div_(grad.size(-1));
        s.row_var.lerp_(row_mean, one_minus_beta2);
        torch::Tensor col_mean = at::linalg_vector_norm(grad, 2, {-2}, true).square_().div_(grad.size(-2));
        s.col_var.lerp_(col_mean, one_minus_beta2);
        var_estimate = torch::matmul(s.row_var, s.col_var);
        var_estimate.div_(s.row_var.mean({-2}, true).clamp_(eps1));
      } else {
        torch::Tensor grad_squared = grad * grad;
        s.variance.lerp_(grad_squared, one_minus_beta2);
        var_estimate = s.variance.clone();
      }
      torch::Tensor update = var_estimate.clamp_(eps1 * eps1).rsqrt_();
      update.mul_(grad);
      const double denom =
          std::max(1.0, at::linalg_vector_norm(update, 2).item<double>() /
                          (std::pow(static_cast<double>(update.numel()), 0.5) * o.d()));
      param.add_(update, -alpha / denom);
    }
  }
  return loss;
}

}  // namespace memdiag
