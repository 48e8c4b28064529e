// The decoder-only transformer a case's model spec describes, as modules a
// torch::nn::Sequential can hold (each takes and returns one tensor), so
// checkpointing by block, accumulation and the precision remedies apply
// to it as to the MLP. GPT-2's layout: token and position embeddings,
// pre-norm blocks of causal self-attention and a GELU feed-forward, a
// final norm, the vocabulary head (tied to the token embedding unless the
// case says otherwise).
#include "transformer.hpp"

#include <torch/nn/functional/activation.h>
#include <torch/nn/functional/dropout.h>
#include <torch/nn/init.h>
#include <torch/nn/module.h>
#include <torch/utils.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include <cmath>

namespace memdiag {
namespace {

// A Linear layer as Python's nn.Linear runs it: ATen's linear, which for a
// contiguous [batch, length, width] input flattens it and makes one addmm
// (ViewBackward, AddmmBackward in the graph). torch::nn::Linear's forward
// (the C++ API's functional linear) makes a matmul and adds the bias in
// place instead (MmBackward, UnsafeViewBackward, AddBackward): the same
// sums, but another graph, whose backward the engine runs in another order
// and whose gradients land in other cached blocks (2-7 MiB of allocated
// apart from Python on the H200 from step 0's step() on, with the math
// kernel).
torch::Tensor linear(const torch::nn::Linear& l, const torch::Tensor& x) {
  return torch::linear(x, l->weight, l->bias);
}

// A Python float in an operation: a 0-dim CPU tensor marked as a wrapped
// number (it takes the other operand's dtype), so `t * scale` is
// mul.Tensor (MulBackward0) as in Python, not mul.Scalar.
torch::Tensor python_scalar(double v) {
  torch::Tensor t = torch::scalar_tensor(v, torch::kDouble);
  t.unsafeGetTensorImpl()->set_wrapped_number(true);
  return t;
}

// Tokens [batch, length] (int64) -> hidden states [batch, length, width].
struct EmbedImpl : torch::nn::Module {
  EmbedImpl(const ModelSpec& m, int length)
      : tokens(register_module("tokens", torch::nn::Embedding(m.vocab, m.width))),
        positions(register_module("positions", torch::nn::Embedding(length, m.width))),
        dropout(register_module("dropout", torch::nn::Dropout(m.dropout))) {
    // GPT-2's initialisation: torch::nn::Embedding's N(0, 1) would make a
    // tied head's logits about sqrt(width) wide and the first losses tens
    // of times ln(vocab).
    torch::NoGradGuard no_grad;
    torch::nn::init::normal_(tokens->weight, 0.0, 0.02);
    torch::nn::init::normal_(positions->weight, 0.0, 0.02);
  }
  // Statements in the order a Python forward runs them, each temporary
  // gone where Python's would go: the allocator's block choices follow
  // the order of requests and frees, and a different order can leave a
  // later tensor in a larger cached block (whole MiB more in allocated).
  // C++ leaves the order of an operator's operands to the compiler (GCC
  // makes the right one first) and keeps temporaries to the end of the
  // statement; Python makes the left first and frees an operand once the
  // operation has returned.
  torch::Tensor forward(const torch::Tensor& ids) {
    const torch::Tensor where = torch::arange(ids.size(1), ids.options());
    torch::Tensor sum;
    {
      const torch::Tensor tok = tokens(ids);
      const torch::Tensor pos = positions(where);
      sum = tok + pos;
    }
    return dropout(sum);
  }
  torch::nn::Embedding tokens;
  torch::nn::Embedding positions;
  torch::nn::Dropout dropout;
};
TORCH_MODULE(Embed);

// x + attention(norm(x)), then x + feed_forward(norm(x)).
struct BlockImpl : torch::nn::Module {
  explicit BlockImpl(const ModelSpec& m)
      : heads(m.heads),
        kernel(m.attention),
        dropout_p(m.dropout),
        norm1(register_module("norm1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({m.width})))),
        qkv(register_module("qkv", torch::nn::Linear(m.width, 3 * m.width))),
        proj(register_module("proj", torch::nn::Linear(m.width, m.width))),
        norm2(register_module("norm2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({m.width})))),
        up(register_module("up", torch::nn::Linear(m.width, m.ffn_width))),
        down(register_module("down", torch::nn::Linear(m.ffn_width, m.width))),
        dropout(register_module("dropout", torch::nn::Dropout(m.dropout))) {}

  torch::Tensor attention(const torch::Tensor& x) {
    const std::int64_t b = x.size(0), t = x.size(1), w = x.size(2), d = w / heads;
    // [b, t, 3, heads, d] -> three of [b, heads, t, d]
    const auto parts = linear(qkv, x).view({b, t, 3, heads, d}).permute({2, 0, 3, 1, 4}).unbind(0);
    const torch::Tensor &q = parts[0], &k = parts[1], &v = parts[2];
    const double p = is_training() ? dropout_p : 0.0;
    // Locals of the function, as in a Python forward: the masked scores
    // (not needed by backward) and the mask live until attention returns,
    // through the projection, as a Python function's locals do; freed at
    // the end of the switch's case they left the projection other cached
    // blocks (2-7 MiB apart from Python in allocated on the H200).
    torch::Tensor out, scores, future, probs;
    switch (kernel) {
      case AttentionKernel::kMath: {
        // Spelt out: the scores' softmax, [b, heads, t, t], is kept for
        // backward.
        scores = torch::matmul(q, k.transpose(-2, -1)) * python_scalar(1.0 / std::sqrt(static_cast<double>(d)));
        future = torch::ones({t, t}, x.options().dtype(torch::kBool)).triu(1);
        scores = scores.masked_fill(future, -std::numeric_limits<double>::infinity());
        probs = torch::softmax(scores, -1);
        if (p > 0) probs = torch::nn::functional::dropout(probs, torch::nn::functional::DropoutFuncOptions().p(p).training(true));
        out = torch::matmul(probs, v);
        break;
      }
      case AttentionKernel::kSdpa:
        out = at::scaled_dot_product_attention(q, k, v, {}, p, /*is_causal=*/true);
        break;
    }
    return dropout(linear(proj, out.transpose(1, 2).reshape({b, t, w})));
  }

  torch::Tensor forward(torch::Tensor x) {
    x = x + attention(norm1(x));
    return x + dropout(linear(down, torch::gelu(linear(up, norm2(x)))));
  }

  std::int64_t heads;
  AttentionKernel kernel;
  double dropout_p;
  torch::nn::LayerNorm norm1;
  torch::nn::Linear qkv, proj;
  torch::nn::LayerNorm norm2;
  torch::nn::Linear up, down;
  torch::nn::Dropout dropout;
};
TORCH_MODULE(Block);

// Hidden states -> logits [batch, length, vocab]. A tied head keeps a
// handle on the token embedding's weight rather than registering it again:
// the model's parameters then list it once, and moving the model moves it
// in place (Module::to keeps each parameter's tensor, changing its data).
struct HeadImpl : torch::nn::Module {
  HeadImpl(const ModelSpec& m, const torch::Tensor& tied)
      : norm(register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({m.width})))), tied_weight(tied) {
    if (!m.tied_embeddings) out = register_module("out", torch::nn::Linear(torch::nn::LinearOptions(m.width, m.vocab).bias(false)));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    const torch::Tensor h = norm(x);
    return out ? linear(out, h) : torch::matmul(h, tied_weight.t());
  }
  torch::nn::LayerNorm norm;
  torch::nn::Linear out{nullptr};
  torch::Tensor tied_weight;
};
TORCH_MODULE(Head);

}  // namespace

torch::nn::Sequential build_transformer(const ModelSpec& m, int sequence_length) {
  torch::nn::Sequential seq;
  Embed embed(m, sequence_length);
  const torch::Tensor tied = embed->tokens->weight;
  seq->push_back(embed);
  for (int i = 0; i < m.layers; ++i) seq->push_back(Block(m));
  seq->push_back(Head(m, tied));
  return seq;
}

}  // namespace memdiag
