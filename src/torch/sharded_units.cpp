#include "sharded_units.hpp"
#include "build_config.hpp"

#include "memdiag/errors.hpp"

#include <ATen/native/Resize.h>
#include <torch/utils.h>

#ifdef MEMDIAG_HAVE_CUDA
#include <ATen/native/cuda/Resize.h>
#endif

namespace memdiag {

void resize_storage_bytes(const torch::Tensor& t, std::size_t bytes) {
  c10::StorageImpl* s = t.storage().unsafeGetStorageImpl();
#ifdef MEMDIAG_HAVE_CUDA
  if (t.is_cuda()) {
    at::native::resize_bytes_cuda(s, bytes);
    return;
  }
#endif
  at::native::resize_bytes_cpu(s, bytes);
}

ShardedUnits::ShardedUnits(const std::vector<std::vector<torch::Tensor>>& units, Communicator& comm,
                           bool shard_parameters, const torch::TensorOptions& target)
    : comm_(comm), shard_parameters_(shard_parameters) {
  torch::NoGradGuard no_grad;
  const std::int64_t world = comm.world_size();
  const auto options = target.requires_grad(false);
  for (const std::vector<torch::Tensor>& params : units) {
    Unit u;
    u.params = params;
    for (const torch::Tensor& p : params) {
      if (p.scalar_type() != params.front().scalar_type()) throw Error("a sharded unit's parameters differ in dtype");
      u.numel += p.numel();
    }
    u.padded = (u.numel + world - 1) / world * world;
    u.full = torch::empty({u.padded}, options);
    u.full.narrow(0, u.numel, u.padded - u.numel).zero_();
    std::int64_t at = 0;
    for (const torch::Tensor& p : u.params) {
      u.full.narrow(0, at, p.numel()).copy_(p.reshape({-1}));
      at += p.numel();
    }
    // Every rank starts from rank 0's weights.
    std::vector<torch::Tensor> whole{u.full};
    comm.broadcast(whole, 0);
    at = 0;
    for (torch::Tensor p : u.params) {
      // The parameter (the same variable the module and autograd hold) now
      // reads and writes the unit's buffer; its host copy goes.
      p.set_data(u.full.narrow(0, at, p.numel()).view(p.sizes()));
      at += p.numel();
    }
    const std::int64_t slice = u.padded / world;
    torch::Tensor mine = u.full.narrow(0, comm.rank() * slice, slice);
    // ZeRO-2 steps the slice in place in the whole weights; ZeRO-3 keeps it
    // apart and frees the rest before the next unit is made.
    u.shard = (shard_parameters ? mine.clone() : mine.detach()).requires_grad_(true);
    units_.push_back(std::move(u));
    if (shard_parameters_) release(units_.size() - 1);
  }
}

std::vector<torch::Tensor> ShardedUnits::shards() const {
  std::vector<torch::Tensor> out;
  for (const Unit& u : units_) out.push_back(u.shard);
  return out;
}

std::vector<torch::Tensor> ShardedUnits::state_tensors() const {
  std::vector<torch::Tensor> out;
  for (const Unit& u : units_) {
    out.push_back(u.full);
    out.push_back(u.shard);
  }
  return out;
}

void ShardedUnits::gather(std::size_t i) {
  Unit& u = units_[i];
  if (u.gathered) return;
  resize_storage_bytes(u.full, static_cast<std::size_t>(u.padded) * u.full.element_size());
  torch::Tensor mine = u.shard.detach();
  comm_.all_gather_into(u.full, mine);
  u.gathered = true;
}

void ShardedUnits::release(std::size_t i) {
  Unit& u = units_[i];
  if (!shard_parameters_ || !u.gathered) return;
  resize_storage_bytes(u.full, 0);
  u.gathered = false;
}

void ShardedUnits::reduce_gradients(std::size_t i) {
  torch::NoGradGuard no_grad;
  Unit& u = units_[i];
  torch::Tensor flat = torch::zeros({u.padded}, u.full.options());
  std::int64_t at = 0;
  // Every rank takes part whatever gradients it made: one it did not make
  // adds zeros.
  for (torch::Tensor& p : u.params) {
    if (p.grad().defined()) {
      flat.narrow(0, at, p.numel()).copy_(p.grad().reshape({-1}));
      p.mutable_grad() = torch::Tensor();  // the full gradient goes as soon as it is flat
    }
    at += p.numel();
  }
  torch::Tensor mine = torch::empty({u.padded / comm_.world_size()}, u.full.options());
  // Dropped as soon as it is summed: the communicator has let go of it.
  comm_.reduce_scatter_sum(mine, flat);
  flat = torch::Tensor();
  mine.div_(static_cast<double>(comm_.world_size()));
  if (u.shard.grad().defined()) {
    u.shard.mutable_grad().add_(mine);
  } else {
    u.shard.mutable_grad() = mine;
  }
}

void ShardedUnits::after_step() {
  if (shard_parameters_) return;
  torch::NoGradGuard no_grad;
  for (Unit& u : units_) {
    // The slice is part of the buffer gathered into: sent from a copy.
    torch::Tensor mine = u.shard.detach().clone();
    comm_.all_gather_into(u.full, mine);
  }
}

}  // namespace memdiag
