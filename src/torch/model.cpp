#include "model.hpp"

#include "memdiag/workload.hpp"

#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/linear.h>

namespace memdiag {

c10::ScalarType model_dtype(const ModelSpec& m) {
  return m.dtype == "bfloat16" ? c10::ScalarType::BFloat16 : c10::ScalarType::Float;
}

std::int64_t bytes_per_element(const ModelSpec& m) { return m.dtype == "bfloat16" ? 2 : 4; }

std::int64_t count_parameters(const ModelSpec& m) {
  const std::int64_t in = m.input_dim, h = m.hidden_dim, out = m.output_dim;
  return (in * h + h) + (m.depth - 1) * (h * h + h) + (h * out + out);
}

torch::nn::Sequential build_model(const ModelSpec& m) {
  torch::nn::Sequential seq;
  std::int64_t width = m.input_dim;
  for (int i = 0; i < m.depth; ++i) {
    seq->push_back(torch::nn::Linear(width, m.hidden_dim));
    if (m.activation == "gelu") {
      seq->push_back(torch::nn::GELU());
    } else if (m.activation == "tanh") {
      seq->push_back(torch::nn::Tanh());
    } else {
      seq->push_back(torch::nn::ReLU());
    }
    width = m.hidden_dim;
  }
  seq->push_back(torch::nn::Linear(width, m.output_dim));
  return seq;
}

}  // namespace memdiag
