// Optimizers LibTorch does not have, for the optimizer-state remedies
// (memdiag/remedy.hpp): Adam/AdamW keeping its two moments in another
// format (bfloat16, or 8 bits in blocks) or in host memory, and Adafactor
// as torch.optim.Adafactor defines it.
#pragma once

#include <torch/optim/optimizer.h>

#include <vector>

namespace memdiag {

// The tensors an optimizer's per-parameter state holds on the device (the
// tensor census counts them; an offloaded state's are in host memory), and
// in host memory (what offloading moved there).
class CountedState {
 public:
  virtual ~CountedState() = default;
  virtual std::vector<torch::Tensor> device_tensors() const = 0;
  virtual std::vector<torch::Tensor> host_tensors() const { return {}; }
};

enum class MomentFormat {
  kFp32,           // as torch.optim keeps them (the others' reference)
  kBf16,           // bfloat16: 2 bytes a value
  kBlockwise8bit,  // 1 byte a value and a float scale per 256 (memdiag's quantiser)
};

struct CompactAdamOptions : public torch::optim::OptimizerCloneableOptions<CompactAdamOptions> {
  CompactAdamOptions(double lr = 1e-3) : lr_(lr) {}
  TORCH_ARG(double, lr) = 1e-3;
  TORCH_ARG(double, beta1) = 0.9;
  TORCH_ARG(double, beta2) = 0.999;
  TORCH_ARG(double, eps) = 1e-8;
  TORCH_ARG(double, weight_decay) = 0;
  // Adam's weight decay is added to the gradient; AdamW's shrinks the weight.
  TORCH_ARG(bool, decoupled) = true;
  TORCH_ARG(MomentFormat, format) = MomentFormat::kFp32;
  // The moments, and an fp32 copy of the weights the update is made on, in
  // host memory (pinned where CUDA is there to copy from).
  TORCH_ARG(bool, on_host) = false;

 public:
  double get_lr() const override { return lr(); }
  void set_lr(const double lr) override { this->lr(lr); }
};

// One parameter's state: the step count and the two moments as the format
// keeps them (fp32/bf16: the tensors; 8-bit: codes and per-block scales).
struct CompactAdamState : public torch::optim::OptimizerCloneableParamState<CompactAdamState>, public CountedState {
  std::int64_t step = 0;
  torch::Tensor exp_avg, exp_avg_sq;                // kFp32, kBf16
  torch::Tensor avg_codes, avg_scales;              // kBlockwise8bit: the first moment
  torch::Tensor avg_sq_codes, avg_sq_scales;        // ... and the second
  torch::Tensor host_weight;                        // on_host: the fp32 weights stepped there
  bool on_host = false;
  std::vector<torch::Tensor> all() const;
  std::vector<torch::Tensor> device_tensors() const override;
  std::vector<torch::Tensor> host_tensors() const override;
};

// Adam or AdamW as LibTorch's torch::optim::Adam/AdamW steps them
// (fp32 and on the device, it gives the same weights to the last bit), with
// the moments kept as the options say.
class CompactAdam : public torch::optim::Optimizer {
 public:
  CompactAdam(std::vector<torch::Tensor> params, CompactAdamOptions options);
  torch::Tensor step(LossClosure closure = nullptr) override;
};

// Blockwise 8-bit storage of a tensor (memdiag's design, for state-8bit):
// blocks of 256 values, each with the float scale of its largest magnitude;
// a value is kept as the code of its magnitude's square root over the
// block's (companding: finer steps near zero, where most of a moment's
// values are). Signed (int8, -127..127) for the first moment, unsigned
// (uint8, 0..255) for the second, which is companded from its square root
// (its range is the square of the first's); read back, the second moment is
// never below the first's square.
struct Blockwise8bit {
  torch::Tensor codes;   // int8 or uint8, blocks x 256
  torch::Tensor scales;  // float, one per block
};
Blockwise8bit quantize_signed(const torch::Tensor& x);
torch::Tensor dequantize_signed(const Blockwise8bit& q, const torch::Tensor& like);
Blockwise8bit quantize_unsigned(const torch::Tensor& x);  // x >= 0
torch::Tensor dequantize_unsigned(const Blockwise8bit& q, const torch::Tensor& like);

// Adafactor with torch.optim.Adafactor's defaults (lr 1e-2, beta2_decay
// -0.8, eps (None, 1e-3), d 1, weight_decay 0) and its single-tensor
// algorithm, operation for operation.
struct AdafactorOptions : public torch::optim::OptimizerCloneableOptions<AdafactorOptions> {
  AdafactorOptions(double lr = 1e-2) : lr_(lr) {}
  TORCH_ARG(double, lr) = 1e-2;
  TORCH_ARG(double, beta2_decay) = -0.8;
  TORCH_ARG(double, eps2) = 1e-3;
  TORCH_ARG(double, d) = 1.0;
  TORCH_ARG(double, weight_decay) = 0.0;

 public:
  double get_lr() const override { return lr(); }
  void set_lr(const double lr) override { this->lr(lr); }
};

struct AdafactorState : public torch::optim::OptimizerCloneableParamState<AdafactorState>, public CountedState {
  double step = 0;
  torch::Tensor row_var, col_var;  // a matrix's factors
  torch::Tensor variance;          // a vector's second moment
  std::vector<torch::Tensor> device_tensors() const override;
};

class Adafactor : public torch::optim::Optimizer {
 public:
  Adafactor(std::vector<torch::Tensor> params, AdafactorOptions options);
  torch::Tensor step(LossClosure closure = nullptr) override;
};

}  // namespace memdiag
