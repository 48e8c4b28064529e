#include "memdiag/tensor_census.hpp"
#include "optimizers.hpp"

#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <unordered_set>

namespace memdiag {
namespace {

class Counter {
 public:
  void add(const torch::Tensor& t) {
    if (!t.defined() || !t.has_storage()) return;
    const void* key = t.storage().data();
    if (key == nullptr || !seen_.insert(key).second) return;
    bytes_ += static_cast<std::int64_t>(t.storage().nbytes());
  }
  double mib() const { return to_mib(bytes_); }

 private:
  std::unordered_set<const void*> seen_;
  std::int64_t bytes_ = 0;
};

void add_state(Counter& c, const torch::optim::OptimizerParamState& s) {
  if (auto* a = dynamic_cast<const torch::optim::AdamWParamState*>(&s)) {
    c.add(a->exp_avg());
    c.add(a->exp_avg_sq());
    c.add(a->max_exp_avg_sq());
  } else if (auto* b = dynamic_cast<const torch::optim::AdamParamState*>(&s)) {
    c.add(b->exp_avg());
    c.add(b->exp_avg_sq());
    c.add(b->max_exp_avg_sq());
  } else if (auto* m = dynamic_cast<const torch::optim::SGDParamState*>(&s)) {
    c.add(m->momentum_buffer());
  } else if (auto* own = dynamic_cast<const CountedState*>(&s)) {
    // memdiag's own optimizers (optimizers.hpp): what they keep on the device.
    for (const torch::Tensor& t : own->device_tensors()) c.add(t);
  }
}

}  // namespace

TensorCensus take_census(const std::vector<torch::Tensor>& parameters,
                         const torch::optim::Optimizer* optimizer) {
  Counter params, grads, state;
  for (const torch::Tensor& p : parameters) {
    params.add(p);
    grads.add(p.grad());
  }
  if (optimizer != nullptr) {
    for (const auto& kv : optimizer->state()) {
      if (kv.second) add_state(state, *kv.second);
    }
  }
  return TensorCensus{params.mib(), grads.mib(), state.mib()};
}

}  // namespace memdiag
