#include "model.hpp"
#include "transformer.hpp"

#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/linear.h>

#include <algorithm>
#include <cmath>

namespace memdiag {

c10::ScalarType model_dtype(const ModelSpec& m) {
  switch (m.dtype) {
    case DType::kFloat32: return c10::ScalarType::Float;
    case DType::kBFloat16: return c10::ScalarType::BFloat16;
  }
  return c10::ScalarType::Float;
}

namespace {
torch::nn::AnyModule activation(Activation a) {
  switch (a) {
    case Activation::kRelu: return torch::nn::AnyModule(torch::nn::ReLU());
    case Activation::kGelu: return torch::nn::AnyModule(torch::nn::GELU());
    case Activation::kTanh: return torch::nn::AnyModule(torch::nn::Tanh());
  }
  return torch::nn::AnyModule(torch::nn::ReLU());
}
}  // namespace

torch::nn::Sequential build_model(const ModelSpec& m) {
  if (m.kind == ModelKind::kTransformer) return build_transformer(m, m.sequence_length);
  torch::nn::Sequential seq;
  std::int64_t width = m.input_dim;
  for (int i = 0; i < m.depth; ++i) {
    seq->push_back(torch::nn::Linear(width, m.hidden_dim));
    seq->push_back(activation(m.activation));
    width = m.hidden_dim;
  }
  seq->push_back(torch::nn::Linear(width, m.output_dim));
  return seq;
}

}  // namespace memdiag
