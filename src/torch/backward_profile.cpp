#include "backward_profile.hpp"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/functions/accumulate_grad.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <cmath>
#include <map>
#include <exception>
#include <unordered_set>

namespace memdiag {
namespace {

using torch::autograd::AccumulateGrad;
using torch::autograd::Node;

constexpr int kChainDepth = 8;  // one-input nodes followed from an output to its AccumulateGrad

// The node's type as Python names it: "AddmmBackward0", not its namespace.
std::string type_name(const Node& n) {
  std::string s = n.name();
  const auto at = s.rfind("::");
  return at == std::string::npos ? s : s.substr(at + 2);
}

// The node's one next node, or null where it has none or several.
Node* only_next(const Node& fn) {
  Node* next = nullptr;
  int valid = 0;
  for (const auto& e : fn.next_edges()) {
    if (e.function) {
      next = e.function.get();
      ++valid;
    }
  }
  return valid == 1 ? next : nullptr;
}

// The AccumulateGrad an edge's gradient reaches through nodes of one input
// (a view, a transpose, a dtype cast), or null.
AccumulateGrad* accumulates(Node* fn) {
  for (int i = 0; i < kChainDepth && fn != nullptr; ++i) {
    if (auto* acc = dynamic_cast<AccumulateGrad*>(fn)) return acc;
    fn = only_next(*fn);
  }
  return nullptr;
}

double round6(double mib) { return std::round(mib * 1e6) / 1e6; }

std::int64_t bytes_of(const torch::Tensor& t) {
  return t.defined() ? static_cast<std::int64_t>(t.numel()) * static_cast<std::int64_t>(t.element_size()) : 0;
}

class AccumulatedHook final : public torch::autograd::PostAccumulateGradHook {
 public:
  explicit AccumulatedHook(std::function<void(const torch::Tensor&)> fn) : fn_(std::move(fn)) {}
  void operator()(const torch::autograd::Variable& tensor) override { fn_(tensor); }

 private:
  std::function<void(const torch::Tensor&)> fn_;
};

}  // namespace

BackwardProfiler::BackwardProfiler(const torch::Tensor& loss, const std::vector<torch::Tensor>& parameters,
                                   MemoryProbe& probe, Recorder& recorder)
    : probe_(probe), recorder_(recorder) {
  const std::shared_ptr<Node> root = loss.grad_fn();
  if (!root || !probe_.allocator_bytes()) return;
  for (const torch::Tensor& p : parameters) {
    if (p.requires_grad() && torch::autograd::impl::post_acc_grad_hooks(p) != nullptr) return;
  }
  // The graph, each node once.
  std::vector<std::shared_ptr<Node>> nodes;
  std::unordered_set<const Node*> seen;
  std::vector<std::shared_ptr<Node>> todo{root};
  while (!todo.empty()) {
    std::shared_ptr<Node> fn = std::move(todo.back());
    todo.pop_back();
    if (!fn || !seen.insert(fn.get()).second) continue;
    if (nodes.size() == kNodeCap) return;
    for (const auto& e : fn->next_edges()) {
      if (e.function) todo.push_back(e.function);
    }
    nodes.push_back(std::move(fn));
  }
  for (const torch::Tensor& p : parameters) {
    if (p.requires_grad() && !p.grad().defined()) unset_.insert(p.unsafeGetTensorImpl());
  }
  const auto start = read();
  start_ = start.first;
  hooked_ = true;
  // Each node's edges to a parameter, and the nodes on a gradient's way
  // to its parameter (a weight's TBackward0, autocast's ToCopyBackward0):
  // weight-shaped throughout.
  std::map<const Node*, std::vector<ChainEdge>> edges_of;
  std::unordered_set<const Node*> chains;
  for (const std::shared_ptr<Node>& fn : nodes) {
    if (dynamic_cast<AccumulateGrad*>(fn.get()) != nullptr) continue;
    std::vector<ChainEdge>& edges = edges_of[fn.get()];
    const auto& next = fn->next_edges();
    for (std::size_t k = 0; k < next.size(); ++k) {
      AccumulateGrad* acc = next[k].function ? accumulates(next[k].function.get()) : nullptr;
      if (acc == nullptr) continue;
      edges.push_back({k, next[k].function.get(), acc->variable.unsafeGetTensorImpl()});
      for (Node* f = next[k].function.get(); f != nullptr && f != acc; f = only_next(*f)) chains.insert(f);
    }
  }
  for (const std::shared_ptr<Node>& fn : nodes) {
    if (dynamic_cast<AccumulateGrad*>(fn.get()) != nullptr) continue;
    std::vector<ChainEdge>& edges = edges_of[fn.get()];
    const auto& next = fn->next_edges();
    // The gradients of what the batch flows through: the node's outputs
    // that go to no parameter, and its incoming gradient unless the node
    // is on a gradient's way to its parameter.
    NodeInfo info;
    info.name = type_name(*fn);
    info.weights_only = chains.count(fn.get()) > 0;
    for (std::size_t k = 0; k < next.size() && !info.weights_only; ++k) {
      if (!next[k].function) continue;
      bool to_parameter = false;
      for (const ChainEdge& e : edges) to_parameter = to_parameter || e.output == k;
      if (!to_parameter) info.batch_outputs.push_back(k);
    }
    info.edges = std::move(edges);
    const Node* self = fn.get();
    const std::uintptr_t key = fn->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
        [this, self, info = std::move(info)](const torch::autograd::variable_list& outputs,
                                             const torch::autograd::variable_list& inputs) {
          on_node(self, info, outputs, inputs);
          return outputs;
        }));
    node_hooks_.emplace_back(fn, key);
  }
  std::unordered_set<const void*> hooked;
  for (const torch::Tensor& p : parameters) {
    if (!p.requires_grad() || !hooked.insert(p.unsafeGetTensorImpl()).second) continue;
    torch::autograd::impl::set_post_acc_grad_hooks(
        p, std::make_unique<AccumulatedHook>([this](const torch::Tensor& t) { on_accumulated(t); }));
    hooked_parameters_.push_back(p);
  }
}

BackwardProfiler::~BackwardProfiler() {
  for (auto& [node, key] : node_hooks_) {
    if (const std::shared_ptr<Node> n = node.lock()) n->del_post_hook(key);
  }
  for (const torch::Tensor& p : hooked_parameters_) torch::autograd::impl::set_post_acc_grad_hooks(p, nullptr);
}

// Allocated now and the peak since the last reading; the probe's peak is
// reset for the next and carried to the phase.
std::pair<std::int64_t, std::int64_t> BackwardProfiler::read() {
  const auto bytes = probe_.allocator_bytes().value_or(std::make_pair<std::int64_t, std::int64_t>(0, 0));
  probe_.reset_peak();
  recorder_.carry_peak(to_mib(bytes.second));
  return bytes;
}

std::int64_t BackwardProfiler::flying(const std::map<const Node*, Flights>* more) const {
  // Each storage once: a view passed on is the same storage.
  std::map<const void*, std::int64_t> seen;
  for (const auto& [node, flights] : in_flight_) {
    for (const auto& [storage, f] : flights) seen[storage] = f.bytes;
  }
  if (more != nullptr) {
    for (const auto& [node, flights] : *more) {
      for (const auto& [storage, f] : flights) seen[storage] = f.bytes;
    }
  }
  std::int64_t sum = 0;
  for (const auto& [storage, bytes] : seen) sum += bytes;
  return sum;
}

void BackwardProfiler::on_node(const Node* node, const NodeInfo& info, const std::vector<torch::Tensor>& outputs,
                               const std::vector<torch::Tensor>& inputs) {
  if (failed_) return;
  try {
    std::map<const Node*, Flights> out;
    for (const ChainEdge& e : info.edges) {
      if (e.output >= outputs.size() || !outputs[e.output].defined()) continue;
      const c10::Storage& s = outputs[e.output].storage();
      out[e.consumer][s.data()] = InFlight{static_cast<std::int64_t>(s.nbytes()), e.parameter};
    }
    const auto [held, peak] = read();
    std::int64_t operands = 0;
    if (!info.weights_only) {
      for (const torch::Tensor& t : inputs) operands += bytes_of(t);
    }
    for (std::size_t k : info.batch_outputs) {
      if (k < outputs.size()) operands += bytes_of(outputs[k]);
    }
    readings_.push_back({peak, held, made_ + flying(&out), operands, info.name});
    in_flight_.erase(node);
    for (auto& [consumer, flights] : out) in_flight_[consumer].insert(flights.begin(), flights.end());
  } catch (const std::exception&) {
    failed_ = true;  // never the loop's failure: the profile is dropped
  }
}

void BackwardProfiler::on_accumulated(const torch::Tensor& parameter) {
  if (failed_) return;
  try {
    const torch::Tensor& g = parameter.grad();
    if (!g.defined()) return;
    // The peak since the last reading held what was on its way to the
    // parameter (it lives until the accumulation is done) and, where its
    // gradient is made now, that gradient: the same storage where it was
    // taken from the node that made it, a copy otherwise.
    const c10::Storage& s = g.storage();
    const void* impl = parameter.unsafeGetTensorImpl();
    const bool fresh = unset_.count(impl) > 0;
    bool taken = false;
    for (const auto& [node, flights] : in_flight_) taken = taken || flights.count(s.data()) > 0;
    const auto bytes = static_cast<std::int64_t>(s.nbytes());
    const auto [held, peak] = read();
    readings_.push_back({peak, held, made_ + flying() + (fresh && !taken ? bytes : 0), 0, "AccumulateGrad"});
    // From here it is the parameter's gradient, or added into it: no
    // longer in flight.
    for (auto it = in_flight_.begin(); it != in_flight_.end();) {
      for (auto f = it->second.begin(); f != it->second.end();) {
        f = f->second.parameter == impl ? it->second.erase(f) : std::next(f);
      }
      it = it->second.empty() ? in_flight_.erase(it) : std::next(it);
    }
    if (fresh) {
      unset_.erase(impl);
      made_ += bytes;
    }
  } catch (const std::exception&) {
    failed_ = true;
  }
}

std::optional<BackwardProfile> BackwardProfiler::finish(std::int64_t step, std::int64_t samples,
                                                        std::optional<std::int64_t> tokens) {
  if (!hooked_ || failed_ || readings_.empty() || samples <= 0) return std::nullopt;
  BackwardProfile b;
  b.step = step;
  b.samples = samples;
  b.tokens = tokens;
  b.start_mib = round6(to_mib(start_));
  for (const Reading& r : readings_) {
    b.names.push_back(r.name);
    b.rise_mib.push_back(round6(to_mib(r.peak - start_)));
    b.gradients_mib.push_back(round6(to_mib(r.gradient_bytes)));
    b.held_mib.push_back(round6(to_mib(r.held - start_)));
    b.operands_mib.push_back(round6(to_mib(r.operand_bytes)));
  }
  return b;
}

}  // namespace memdiag
