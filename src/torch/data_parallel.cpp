#include "data_parallel.hpp"

#include <algorithm>

namespace memdiag {
namespace {
constexpr std::int64_t kBucketCapBytes = 25 * 1024 * 1024;
}  // namespace

void GradientBuckets::all_reduce(const std::vector<torch::Tensor>& params, Communicator& comm) {
  if (buckets_.empty()) build(params);
  for (Bucket& b : buckets_) {
    for (const Slot& s : b.slots) {
      const torch::Tensor& g = params[s.param].grad();
      // A parameter without a gradient this step contributes zeros, as in DDP.
      if (g.defined()) {
        b.flat.narrow(0, s.offset, s.numel).copy_(g.reshape(-1));
      } else {
        b.flat.narrow(0, s.offset, s.numel).zero_();
      }
    }
    comm.all_reduce_sum(b.flat);
    b.flat.div_(comm.world_size());
    for (const Slot& s : b.slots) {
      torch::Tensor g = params[s.param].mutable_grad();
      if (g.defined()) g.view(-1).copy_(b.flat.narrow(0, s.offset, s.numel));
    }
  }
}

void GradientBuckets::build(const std::vector<torch::Tensor>& params) {
  std::vector<Slot> slots;
  std::int64_t numel = 0, bytes = 0;
  auto flush = [&](const torch::Tensor& like) {
    if (slots.empty()) return;
    buckets_.push_back({torch::empty({numel}, like.options()), std::move(slots)});
    slots.clear();
    numel = bytes = 0;
  };
  for (std::size_t i = 0; i < params.size(); ++i) {
    const torch::Tensor& p = params[i];
    slots.push_back({i, numel, p.numel()});
    numel += p.numel();
    bytes += p.numel() * static_cast<std::int64_t>(p.element_size());
    if (bytes >= kBucketCapBytes) flush(p);
  }
  if (!params.empty()) flush(params.back());
}

std::vector<int> shard_owners(const std::vector<torch::Tensor>& params, int world) {
  std::vector<std::int64_t> load(static_cast<std::size_t>(world), 0);
  std::vector<int> owner(params.size(), 0);
  for (std::size_t i = 0; i < params.size(); ++i) {
    const auto r = static_cast<std::size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    owner[i] = static_cast<int>(r);
    load[r] += params[i].numel();
  }
  return owner;
}

}  // namespace memdiag
