// The caching allocator's malloc and free paths, as torch 2.11 has them
// (c10/cuda/CUDACachingAllocator.cpp), with PyTorch's default settings:
// what memdiag_replay's header says, and nothing else (no streams but one,
// no expandable segments, no max_split_size, no garbage collection).
#include "memdiag/allocator_replay.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>

namespace memdiag {
namespace {

constexpr std::int64_t kMinBlockSize = 512;         // every size rounded to this
constexpr std::int64_t kSmallSize = 1 << 20;        // the largest small-pool request
constexpr std::int64_t kSmallBuffer = 2 << 20;      // small-pool segments
constexpr std::int64_t kMinLargeAlloc = 10 << 20;   // 1-10 MiB requests share kLargeBuffer segments
constexpr std::int64_t kLargeBuffer = 20 << 20;
constexpr std::int64_t kRoundLarge = 2 << 20;       // larger requests' segments rounded to this

std::int64_t round_size(std::int64_t size) {
  return size < kMinBlockSize ? kMinBlockSize : kMinBlockSize * ((size + kMinBlockSize - 1) / kMinBlockSize);
}

std::int64_t allocation_size(std::int64_t size) {
  if (size <= kSmallSize) return kSmallBuffer;
  if (size < kMinLargeAlloc) return kLargeBuffer;
  return kRoundLarge * ((size + kRoundLarge - 1) / kRoundLarge);
}

struct Block {
  std::int64_t size = 0;
  std::int64_t ptr = 0;
  int prev = -1, next = -1;  // neighbours in the segment (indices), -1: none
  bool allocated = false;
  bool small = false;
};

// The device's virtual addresses for new segments: a range given back is
// reused from its top (the highest such range that fits), else the next
// range below everything so far. The driver's own choice is not
// documented; this one made the traced runs' ties (equal free blocks in
// different segments) fall as the allocator's did.
class AddressSpace {
 public:
  std::int64_t take(std::int64_t size) {
    auto best = holes_.end();
    for (auto it = holes_.begin(); it != holes_.end(); ++it) {
      if (it->second - it->first >= size && (best == holes_.end() || it->second > best->second)) best = it;
    }
    if (best != holes_.end()) {
      const std::int64_t start = best->first, end = best->second;
      holes_.erase(best);
      if (end - size > start) holes_[start] = end - size;
      return end - size;
    }
    next_ -= size;
    return next_;
  }
  void give_back(std::int64_t ptr, std::int64_t size) {
    std::int64_t start = ptr, end = ptr + size;
    // Merged with the ranges it touches, as one free range.
    auto after = holes_.find(end);
    if (after != holes_.end()) {
      end = after->second;
      holes_.erase(after);
    }
    for (auto it = holes_.begin(); it != holes_.end(); ++it) {
      if (it->second == start) {
        start = it->first;
        holes_.erase(it);
        break;
      }
    }
    holes_[start] = end;
  }

 private:
  std::int64_t next_ = std::int64_t{1} << 46;
  std::map<std::int64_t, std::int64_t> holes_;  // start -> end
};

class CachingModel {
 public:
  CachingModel(std::optional<std::int64_t> limit, ReplayResult& out) : limit_(limit), out_(out) {}

  // The block handed out, or -1 when the request fails (the state is then
  // the state at the failure).
  int malloc(std::int64_t request) {
    const std::int64_t size = round_size(request);
    const bool small = size <= kSmallSize;
    int b = take_free(size, small);
    if (b < 0) {
      const std::int64_t seg = allocation_size(size);
      b = new_segment(seg, small);
      if (b < 0) {
        release_cached();
        ++out_.retries;
        b = new_segment(seg, small);
        if (b < 0) return -1;
      }
    }
    Block& blk = blocks_[b];
    const std::int64_t remaining = blk.size - size;
    if (small ? remaining >= kMinBlockSize : remaining > kSmallSize) {
      // The front is handed out; the rest stays free in the pool.
      Block front;
      front.size = size;
      front.ptr = blk.ptr;
      front.small = small;
      front.prev = blk.prev;
      front.next = b;
      const int f = add(front);
      Block& rest = blocks_[b];  // add() may have moved the arena
      if (rest.prev >= 0) blocks_[rest.prev].next = f;
      rest.prev = f;
      rest.ptr += size;
      rest.size -= size;
      insert_free(b);
      b = f;
    }
    blocks_[b].allocated = true;
    allocated_ += blocks_[b].size;
    out_.peak_allocated = std::max(out_.peak_allocated, allocated_);
    return b;
  }

  void free(int b) {
    Block& blk = blocks_[b];
    blk.allocated = false;
    allocated_ -= blk.size;
    for (const int c : {blk.prev, blk.next}) {
      if (c < 0 || blocks_[c].allocated) continue;
      erase_free(c);
      Block& me = blocks_[b];
      Block& other = blocks_[c];
      if (c == me.prev) {
        me.ptr = other.ptr;
        me.prev = other.prev;
        if (me.prev >= 0) blocks_[me.prev].next = b;
      } else {
        me.next = other.next;
        if (me.next >= 0) blocks_[me.next].prev = b;
      }
      me.size += other.size;
      spare_.push_back(c);
    }
    insert_free(b);
  }

  // Every cached segment with no live block goes back to the device.
  void release_cached() {
    for (auto* pool : {&large_, &small_}) {
      for (auto it = pool->begin(); it != pool->end();) {
        const int b = std::get<2>(*it);
        const Block& blk = blocks_[b];
        if (blk.prev < 0 && blk.next < 0) {
          reserved_ -= blk.size;
          space_.give_back(blk.ptr, blk.size);
          spare_.push_back(b);
          it = pool->erase(it);
        } else {
          ++it;
        }
      }
    }
  }

  ReplayState state() const {
    ReplayState s;
    s.allocated = allocated_;
    s.reserved = reserved_;
    for (const auto* pool : {&large_, &small_}) {
      s.free_blocks += static_cast<std::int64_t>(pool->size());
      if (!pool->empty()) s.largest_free_block = std::max(s.largest_free_block, std::get<0>(*pool->rbegin()));
    }
    return s;
  }

 private:
  using Key = std::tuple<std::int64_t, std::int64_t, int>;  // size, address, block

  int add(const Block& blk) {
    if (!spare_.empty()) {
      const int i = spare_.back();
      spare_.pop_back();
      blocks_[static_cast<std::size_t>(i)] = blk;
      return i;
    }
    blocks_.push_back(blk);
    return static_cast<int>(blocks_.size() - 1);
  }
  std::set<Key>& pool(bool small) { return small ? small_ : large_; }
  void insert_free(int b) { pool(blocks_[b].small).insert({blocks_[b].size, blocks_[b].ptr, b}); }
  void erase_free(int b) { pool(blocks_[b].small).erase({blocks_[b].size, blocks_[b].ptr, b}); }

  // The smallest free block that fits, the lowest address among equals.
  int take_free(std::int64_t size, bool small) {
    std::set<Key>& p = pool(small);
    const auto it = p.lower_bound({size, std::numeric_limits<std::int64_t>::min(), -1});
    if (it == p.end()) return -1;
    const int b = std::get<2>(*it);
    p.erase(it);
    return b;
  }

  int new_segment(std::int64_t bytes, bool small) {
    if (limit_ && reserved_ + bytes > *limit_) return -1;
    Block blk;
    blk.size = bytes;
    blk.ptr = space_.take(bytes);
    blk.small = small;
    reserved_ += bytes;
    out_.peak_reserved = std::max(out_.peak_reserved, reserved_);
    out_.segments_made.push_back(bytes);
    return add(blk);
  }

  std::optional<std::int64_t> limit_;
  ReplayResult& out_;
  std::vector<Block> blocks_;
  std::vector<int> spare_;
  std::set<Key> small_, large_;
  AddressSpace space_;
  std::int64_t allocated_ = 0, reserved_ = 0;
};

}  // namespace

ReplayResult replay(const std::vector<ReplayOp>& ops, const ReplayAllocator& allocator) {
  ReplayResult out;
  CachingModel cache(allocator.limit_bytes, out);
  std::unordered_map<std::int64_t, int> blocks;             // caching: allocation -> block
  std::unordered_map<std::int64_t, std::int64_t> live_bytes;  // uncached: allocation -> bytes
  std::int64_t live = 0;
  Phase phase = Phase::kSetup;
  std::optional<int> step;
  bool in_phase = false;
  const auto now = [&] {
    if (allocator.caching) return cache.state();
    ReplayState s;
    s.allocated = s.reserved = live;
    return s;
  };
  const auto end_phase = [&] {
    if (!in_phase) return;
    const ReplayState s = now();
    out.phase_ends.push_back({phase, step, s.reserved, s.allocated});
  };
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const ReplayOp& op = ops[i];
    switch (op.kind) {
      case ReplayOp::Kind::kPhase:
        end_phase();
        phase = op.phase;
        step = op.step;
        in_phase = true;
        break;
      case ReplayOp::Kind::kEmptyCache:
        if (allocator.caching) cache.release_cached();
        break;
      case ReplayOp::Kind::kAlloc: {
        bool failed = false;
        if (allocator.caching) {
          const int b = cache.malloc(op.bytes);
          if (b < 0) {
            failed = true;
          } else {
            blocks[op.id] = b;
          }
        } else if (allocator.limit_bytes && live + op.bytes > *allocator.limit_bytes) {
          failed = true;
        } else {
          live += op.bytes;
          live_bytes[op.id] = op.bytes;
          out.peak_allocated = out.peak_reserved = std::max(out.peak_allocated, live);
        }
        if (failed) {
          out.completed = false;
          out.failed_op = i;
          out.phase = phase;
          out.step = step;
          // As PyTorch's message says it ("Tried to allocate"): the segment
          // the allocator could not make.
          out.request = allocator.caching ? allocation_size(round_size(op.bytes)) : op.bytes;
          out.at_failure = now();
          return out;
        }
        break;
      }
      case ReplayOp::Kind::kFree:
        if (allocator.caching) {
          const auto it = blocks.find(op.id);
          if (it != blocks.end()) {
            cache.free(it->second);
            blocks.erase(it);
          }
        } else {
          const auto it = live_bytes.find(op.id);
          if (it != live_bytes.end()) {
            live -= it->second;
            live_bytes.erase(it);
          }
        }
        break;
    }
  }
  end_phase();
  return out;
}

std::vector<ReplayOp> ops_of(const TracePass& pass) {
  std::vector<ReplayOp> ops;
  ops.reserve(pass.events.size());
  std::int64_t next_id = 0;
  for (const TraceEvent& e : pass.events) {
    ReplayOp op;
    switch (e.kind) {
      case TraceEvent::Kind::kAlloc:
        op.kind = ReplayOp::Kind::kAlloc;
        op.bytes = e.bytes;
        op.id = next_id++;
        break;
      case TraceEvent::Kind::kFree:
        op.kind = ReplayOp::Kind::kFree;
        op.id = e.id;
        break;
      case TraceEvent::Kind::kPhase:
        op.kind = ReplayOp::Kind::kPhase;
        op.phase = e.phase;
        op.step = e.step;
        break;
      case TraceEvent::Kind::kEmptyCache: op.kind = ReplayOp::Kind::kEmptyCache; break;
      case TraceEvent::Kind::kFailed:
        // The request refused: replayed, so the replay fails (or not) there.
        op.kind = ReplayOp::Kind::kAlloc;
        op.bytes = e.bytes;
        op.id = next_id++;
        break;
      case TraceEvent::Kind::kSegmentAlloc:
      case TraceEvent::Kind::kSegmentFree: continue;
    }
    ops.push_back(op);
  }
  return ops;
}

std::string replay_disagreement(const AllocationTrace& trace) {
  if (trace.passes.empty()) return "the trace has no pass";
  const TracePass& pass = trace.passes.front();
  ReplayAllocator a;
  a.caching = trace.allocator == "cuda-caching-allocator";
  a.limit_bytes = trace.limit_bytes;
  const ReplayResult r = replay(ops_of(pass), a);
  const bool failed = std::any_of(pass.events.begin(), pass.events.end(),
                                  [](const TraceEvent& e) { return e.kind == TraceEvent::Kind::kFailed; });
  if (failed == r.completed) {
    return failed ? "the allocator refused a request the replay granted"
                  : "the replay ran out of memory where the allocator did not";
  }
  if (!a.caching) return {};
  std::vector<std::int64_t> made;
  for (const TraceEvent& e : pass.events) {
    if (e.kind == TraceEvent::Kind::kSegmentAlloc) made.push_back(e.bytes);
  }
  if (made != r.segments_made) {
    return "the replay made " + std::to_string(r.segments_made.size()) + " segments where the allocator made " +
           std::to_string(made.size()) + " (or of other sizes)";
  }
  return {};
}

std::int64_t cuda_limit_bytes(double budget_mib, double device_total_mib) {
  const double total_bytes = std::round(device_total_mib * kMiB);
  const double fraction = std::min(1.0, budget_mib / device_total_mib);
  return static_cast<std::int64_t>(static_cast<std::uint64_t>(fraction * total_bytes));
}

}  // namespace memdiag
