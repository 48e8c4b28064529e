#include "memdiag/replay_capacity.hpp"

#include "memdiag/limits.hpp"

#include <algorithm>
#include <cmath>

namespace memdiag {
namespace {

// One request of a pass: its size and the samples of the step it was made in.
struct Request {
  std::int64_t bytes = 0;
  std::int64_t samples = 0;
  std::optional<int> step;
};

std::vector<Request> requests_of(const TracePass& p) {
  std::vector<Request> out;
  std::optional<int> step;
  for (const TraceEvent& e : p.events) {
    if (e.kind == TraceEvent::Kind::kPhase) step = e.step;
    if (e.kind != TraceEvent::Kind::kAlloc) continue;
    const bool in_step = step && static_cast<std::size_t>(*step) < p.step_samples.size();
    out.push_back({e.bytes, in_step ? p.step_samples[static_cast<std::size_t>(*step)] : p.batch, step});
  }
  return out;
}

// Bytes times samples overflow 64 bits for the largest values a report may hold.
__extension__ using Wide = __int128;

// The same request at two batches: made in the same step, and equal or in
// the ratio of the two steps' samples.
bool same_request(const Request& a, const Request& b) {
  if (a.step != b.step) return false;
  if (a.bytes == b.bytes) return true;
  return a.samples != b.samples &&
         static_cast<Wide>(a.bytes) * b.samples == static_cast<Wide>(b.bytes) * a.samples;
}

// Each request of a matched with one of b or none, in order: where the two
// sequences part (a kernel that launches a staging buffer at one batch and
// not the other), the nearest point where they meet again.
std::vector<std::optional<std::size_t>> align(const std::vector<Request>& a, const std::vector<Request>& b) {
  constexpr std::size_t kLookahead = 96;
  std::vector<std::optional<std::size_t>> match(a.size());
  std::size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (same_request(a[i], b[j])) {
      match[i++] = j++;
      continue;
    }
    std::optional<std::pair<std::size_t, std::size_t>> best;
    for (std::size_t d = 1; d <= 2 * kLookahead && !best; ++d) {
      for (std::size_t di = 0; di <= d; ++di) {
        const std::size_t dj = d - di;
        if (di > kLookahead || dj > kLookahead || i + di >= a.size() || j + dj >= b.size()) continue;
        if (same_request(a[i + di], b[j + dj])) {
          best = {di, dj};
          break;
        }
      }
    }
    if (!best) {
      ++i;  // nothing near: this one stands alone
      continue;
    }
    i += best->first;
    j += best->second;
  }
  return match;
}

// The allocations of a pass that are a reduction's staging buffer: asked
// for, then a few bytes of semaphores (4 per block column), the semaphores
// freed, then the buffer, with nothing between (Reduce.cuh's global
// reduction). By allocation id.
}  // namespace

std::vector<bool> staging_buffers(const TracePass& p) {
  constexpr std::int64_t kMostSemaphoreBytes = 4 * 65535;
  std::vector<bool> out;
  for (const TraceEvent& e : p.events) {
    if (e.kind == TraceEvent::Kind::kAlloc) out.push_back(false);
  }
  std::vector<const TraceEvent*> seq;
  for (const TraceEvent& e : p.events) {
    if (e.kind == TraceEvent::Kind::kAlloc || e.kind == TraceEvent::Kind::kFree) seq.push_back(&e);
  }
  std::int64_t id = 0;
  std::vector<std::int64_t> id_at(seq.size(), -1);
  for (std::size_t k = 0; k < seq.size(); ++k) {
    if (seq[k]->kind == TraceEvent::Kind::kAlloc) id_at[k] = id++;
  }
  for (std::size_t k = 0; k + 3 < seq.size(); ++k) {
    const TraceEvent &buf = *seq[k], &sem = *seq[k + 1], &sem_free = *seq[k + 2], &buf_free = *seq[k + 3];
    if (buf.kind != TraceEvent::Kind::kAlloc || sem.kind != TraceEvent::Kind::kAlloc ||
        sem_free.kind != TraceEvent::Kind::kFree || buf_free.kind != TraceEvent::Kind::kFree) {
      continue;
    }
    if (sem_free.id != id_at[k + 1] || buf_free.id != id_at[k] || sem.bytes > kMostSemaphoreBytes || sem.bytes % 4 != 0) {
      continue;
    }
    out[static_cast<std::size_t>(id_at[k])] = true;
  }
  return out;
}

std::int64_t largest_staging_buffer(const TracePass& p) {
  const std::vector<bool> staging = staging_buffers(p);
  std::int64_t id = 0, most = 0;
  for (const TraceEvent& e : p.events) {
    if (e.kind != TraceEvent::Kind::kAlloc) continue;
    if (staging[static_cast<std::size_t>(id++)]) most = std::max(most, e.bytes);
  }
  return most;
}

namespace {

// A request's size as a whole number of bytes, at least one and no more
// than a report can hold (a scaled request far beyond any device fails the
// replay, as it should, without overflowing).
std::int64_t rounded(double bytes) {
  if (!(bytes >= 1)) return 1;
  if (bytes >= static_cast<double>(limits::kMaxExactInteger)) return limits::kMaxExactInteger;
  return static_cast<std::int64_t>(std::llround(bytes));
}

}  // namespace

std::optional<ScaledTrace> scale_trace(const AllocationTrace& trace, std::string* why) {
  const auto fail = [&](std::string reason) -> std::optional<ScaledTrace> {
    if (why != nullptr) *why = std::move(reason);
    return std::nullopt;
  };
  if (trace.passes.empty()) return fail("the trace has no pass");
  const TracePass& run = trace.passes.front();
  if (run.status != RunStatus::kComplete) return fail("the traced run did not complete");
  const TracePass* other = nullptr;
  for (std::size_t k = 1; k < trace.passes.size() && other == nullptr; ++k) {
    const TracePass& p = trace.passes[k];
    if (p.status == RunStatus::kComplete && p.batch != run.batch && p.sequence_length == run.sequence_length) other = &p;
  }
  if (other == nullptr) return fail("no second pass at another batch completed");
  const std::vector<Request> a = requests_of(run);
  const std::vector<Request> b = requests_of(*other);
  const std::vector<std::optional<std::size_t>> match = align(a, b);

  ScaledTrace t;
  t.ops = ops_of(run);
  t.batch = run.batch;
  t.other_batch = other->batch;
  t.caching = trace.allocator == "cuda-caching-allocator";
  for (const std::int64_t s : run.step_samples) {
    t.step_fraction.push_back(static_cast<double>(s) / static_cast<double>(run.batch));
  }
  t.staging_cap = trace.staging_cap_bytes;
  const std::vector<bool> staging = staging_buffers(run);
  t.requests.resize(a.size());
  t.step_of.resize(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    ScaledRequest& r = t.requests[i];
    t.step_of[i] = a[i].step;
    // A staging buffer that grows with the batch, where the device's bound
    // on it is known: in proportion up to that bound.
    const bool grows = !match[i] || b[*match[i]].bytes != a[i].bytes;
    if (staging[i] && grows && t.staging_cap) {
      r.growth = ScaledRequest::Growth::kStaging;
      r.traced_bytes = a[i].bytes;
      r.traced_samples = a[i].samples;
      ++t.staging_buffers;
      continue;
    }
    const auto workspace = [&] {
      r.growth = ScaledRequest::Growth::kWorkspace;
      r.traced_bytes = a[i].bytes;
      r.traced_samples = a[i].samples;
      ++t.workspaces;
      t.workspace_bytes = std::max(t.workspace_bytes, a[i].bytes);
    };
    if (!match[i]) {
      ++t.unmatched;
      workspace();
      continue;
    }
    const Request& o = b[*match[i]];
    if (o.bytes == a[i].bytes || o.samples == a[i].samples) {
      r.growth = ScaledRequest::Growth::kFixed;
      r.fixed_bytes = static_cast<double>(a[i].bytes);
      continue;
    }
    const std::int64_t d = a[i].bytes - o.bytes, dn = a[i].samples - o.samples;
    if (d % dn != 0) {
      workspace();
      continue;
    }
    r.growth = ScaledRequest::Growth::kPerSample;
    r.bytes_per_sample = static_cast<double>(d / dn);
    r.fixed_bytes = static_cast<double>(a[i].bytes) - r.bytes_per_sample * static_cast<double>(a[i].samples);
  }
  return t;
}

std::int64_t samples_at(const ScaledTrace& t, std::int64_t batch, std::optional<int> step) {
  if (!step || static_cast<std::size_t>(*step) >= t.step_fraction.size()) return batch;
  const double f = t.step_fraction[static_cast<std::size_t>(*step)];
  return std::max<std::int64_t>(1, std::llround(static_cast<double>(batch) * f));
}

std::vector<ReplayOp> ops_at(const ScaledTrace& t, std::int64_t batch, WorkspaceGrowth w) {
  std::vector<ReplayOp> ops = t.ops;
  for (ReplayOp& op : ops) {
    if (op.kind != ReplayOp::Kind::kAlloc) continue;
    const auto id = static_cast<std::size_t>(op.id);
    if (id >= t.requests.size()) continue;
    const ScaledRequest& r = t.requests[id];
    const auto n = static_cast<double>(samples_at(t, batch, t.step_of[id]));
    switch (r.growth) {
      case ScaledRequest::Growth::kFixed: op.bytes = rounded(r.fixed_bytes); break;
      case ScaledRequest::Growth::kPerSample: op.bytes = rounded(r.fixed_bytes + r.bytes_per_sample * n); break;
      case ScaledRequest::Growth::kStaging: {
        const double grown = std::ceil(static_cast<double>(r.traced_bytes) * n / static_cast<double>(r.traced_samples));
        op.bytes = rounded(std::min(grown, static_cast<double>(t.staging_cap.value_or(r.traced_bytes))));
        break;
      }
      case ScaledRequest::Growth::kWorkspace: {
        const double at = static_cast<double>(r.traced_samples);
        const bool hold = w == WorkspaceGrowth::kHeld && n >= at;
        op.bytes = hold ? r.traced_bytes : rounded(std::ceil(static_cast<double>(r.traced_bytes) * n / at));
        break;
      }
    }
  }
  return ops;
}

namespace {

// Between lo, which completes, and hi, which fails with `above`: the last
// that completes and the failure of the one after it.
template <typename Run>
std::pair<std::int64_t, ReplayResult> bisect(std::int64_t lo, std::int64_t hi, ReplayResult above, const Run& run) {
  while (hi - lo > 1) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    ReplayResult r = run(mid);
    if (r.completed) {
      lo = mid;
    } else {
      hi = mid;
      above = std::move(r);
    }
  }
  return {lo, std::move(above)};
}

using Fitting = std::pair<std::int64_t, ReplayResult> (*)(const ScaledTrace&, const ReplayAllocator&, WorkspaceGrowth);

// What a replay of `t` at the limit says, along the batch or the length
// (`fitting`): the largest that fits with the workspaces grown, the failure
// above it, with the workspaces held, and what the trace was made of.
ReplayCapacity capacity_by(const ScaledTrace& t, double budget_mib, std::int64_t limit_bytes, Fitting fitting) {
  ReplayCapacity c;
  c.budget_mib = budget_mib;
  c.limit_bytes = limit_bytes;
  ReplayAllocator a;
  a.caching = t.caching;
  a.limit_bytes = limit_bytes;
  auto [sure, failure] = fitting(t, a, WorkspaceGrowth::kProportional);
  c.max_batch = sure;
  c.failure = std::move(failure);
  c.max_batch_if_held = t.workspaces == 0 ? sure : std::max(sure, fitting(t, a, WorkspaceGrowth::kHeld).first);
  if (!c.failure.completed) c.stranded_bytes = c.failure.at_failure.reserved - c.failure.at_failure.allocated;
  c.staging_buffers = t.staging_buffers;
  c.staging_cap = t.staging_cap;
  c.workspaces = t.workspaces;
  c.workspace_bytes = t.workspace_bytes;
  return c;
}

// The largest batch the replay fits (doubling, then bisecting), and the
// failure of the one above it.
std::pair<std::int64_t, ReplayResult> largest_fitting(const ScaledTrace& t, const ReplayAllocator& a, WorkspaceGrowth w) {
  const auto run = [&](std::int64_t batch) { return replay(ops_at(t, batch, w), a); };
  ReplayResult first = run(1);
  if (!first.completed) return {0, first};
  std::int64_t lo = 1, hi = 0;
  ReplayResult above;
  while (hi == 0) {
    const std::int64_t next = std::min(lo * 2, limits::kMaxBatch);
    ReplayResult r = run(next);
    if (!r.completed) {
      hi = next;
      above = std::move(r);
    } else if (next == limits::kMaxBatch) {
      return {next, ReplayResult{}};
    } else {
      lo = next;
    }
  }
  return bisect(lo, hi, std::move(above), run);
}

}  // namespace

ReplayCapacity replay_capacity(const ScaledTrace& t, double budget_mib, std::int64_t limit_bytes) {
  ReplayCapacity c = capacity_by(t, budget_mib, limit_bytes, largest_fitting);
  c.traced_batch = t.batch;
  c.other_batch = t.other_batch;
  return c;
}

namespace {

// The same request at two lengths: made in the same step, and equal or in
// the ratio of the lengths or of their squares.
bool same_request_along(const Request& a, std::int64_t la, const Request& b, std::int64_t lb) {
  if (a.step != b.step) return false;
  if (a.bytes == b.bytes) return true;
  const Wide x = static_cast<Wide>(a.bytes), y = static_cast<Wide>(b.bytes);
  return x * lb == y * la || x * lb * lb == y * la * la;
}

std::vector<std::optional<std::size_t>> align_along(const std::vector<Request>& a, std::int64_t la,
                                                    const std::vector<Request>& b, std::int64_t lb) {
  constexpr std::size_t kLookahead = 96;
  std::vector<std::optional<std::size_t>> match(a.size());
  std::size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (same_request_along(a[i], la, b[j], lb)) {
      match[i++] = j++;
      continue;
    }
    std::optional<std::pair<std::size_t, std::size_t>> best;
    for (std::size_t d = 1; d <= 2 * kLookahead && !best; ++d) {
      for (std::size_t di = 0; di <= d; ++di) {
        const std::size_t dj = d - di;
        if (di > kLookahead || dj > kLookahead || i + di >= a.size() || j + dj >= b.size()) continue;
        if (same_request_along(a[i + di], la, b[j + dj], lb)) {
          best = {di, dj};
          break;
        }
      }
    }
    if (!best) {
      ++i;
      continue;
    }
    i += best->first;
    j += best->second;
  }
  return match;
}

bool whole(long double x) { return std::fabs(x - std::round(x)) <= 1e-6L * std::max(1.0L, std::fabs(x)); }

}  // namespace

std::optional<ScaledTrace> scale_trace_along_length(const AllocationTrace& trace, std::string* why) {
  const auto fail = [&](std::string reason) -> std::optional<ScaledTrace> {
    if (why != nullptr) *why = std::move(reason);
    return std::nullopt;
  };
  if (trace.passes.empty()) return fail("the trace has no pass");
  const TracePass& run = trace.passes.front();
  if (run.status != RunStatus::kComplete) return fail("the traced run did not complete");
  if (!run.sequence_length) return fail("the model has no sequence");
  std::vector<const TracePass*> others;
  for (std::size_t k = 1; k < trace.passes.size(); ++k) {
    const TracePass& p = trace.passes[k];
    if (p.status == RunStatus::kComplete && p.batch == run.batch && p.sequence_length &&
        *p.sequence_length != *run.sequence_length && others.size() < 2) {
      others.push_back(&p);
    }
  }
  if (others.size() < 2) return fail("no two passes at other lengths completed");
  const std::int64_t l0 = *run.sequence_length, l1 = *others[0]->sequence_length, l2 = *others[1]->sequence_length;
  const std::vector<Request> a = requests_of(run);
  const std::vector<Request> b = requests_of(*others[0]), c = requests_of(*others[1]);
  const auto mb = align_along(a, l0, b, l1), mc = align_along(a, l0, c, l2);

  ScaledTrace t;
  t.axis = ScaledTrace::Axis::kLength;
  t.length = l0;
  t.other_lengths = {l1, l2};
  t.ops = ops_of(run);
  t.batch = run.batch;
  t.caching = trace.allocator == "cuda-caching-allocator";
  t.staging_cap = trace.staging_cap_bytes;
  for (std::size_t k = 0; k < run.step_samples.size(); ++k) t.step_fraction.push_back(1.0);
  const std::vector<bool> staging = staging_buffers(run);
  t.requests.resize(a.size());
  t.step_of.resize(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    ScaledRequest& r = t.requests[i];
    t.step_of[i] = a[i].step;
    const auto workspace = [&](bool unmatched) {
      r.growth = ScaledRequest::Growth::kWorkspace;
      r.traced_bytes = a[i].bytes;
      r.traced_samples = l0;
      ++t.workspaces;
      if (unmatched) ++t.unmatched;
      t.workspace_bytes = std::max(t.workspace_bytes, a[i].bytes);
    };
    if (!mb[i] || !mc[i]) {
      workspace(true);
      continue;
    }
    const long double s0 = a[i].bytes, s1 = b[*mb[i]].bytes, s2 = c[*mc[i]].bytes;
    if (s0 == s1 && s1 == s2) {
      r.growth = ScaledRequest::Growth::kFixed;
      r.fixed_bytes = static_cast<double>(s0);
      continue;
    }
    if (staging[i] && t.staging_cap) {
      r.growth = ScaledRequest::Growth::kStaging;
      r.traced_bytes = a[i].bytes;
      r.traced_samples = l0;
      ++t.staging_buffers;
      continue;
    }
    // The quadratic through the three: divided differences.
    const long double x0 = l0, x1 = l1, x2 = l2;
    const long double d1 = (s0 - s1) / (x0 - x1), d2 = (s1 - s2) / (x1 - x2);
    const long double q = (d1 - d2) / (x0 - x2);
    const long double lin = d1 - q * (x0 + x1);
    const long double fixed = s0 - lin * x0 - q * x0 * x0;
    if (!whole(q) || !whole(lin) || !whole(fixed)) {
      workspace(false);
      continue;
    }
    r.growth = ScaledRequest::Growth::kPerSample;
    r.fixed_bytes = static_cast<double>(std::round(fixed));
    r.bytes_per_token = static_cast<double>(std::round(lin));
    r.bytes_per_token2 = static_cast<double>(std::round(q));
  }
  return t;
}

std::vector<ReplayOp> ops_at_length(const ScaledTrace& t, std::int64_t length, WorkspaceGrowth w) {
  std::vector<ReplayOp> ops = t.ops;
  const auto l = static_cast<double>(length), l0 = static_cast<double>(t.length);
  for (ReplayOp& op : ops) {
    if (op.kind != ReplayOp::Kind::kAlloc) continue;
    const auto id = static_cast<std::size_t>(op.id);
    if (id >= t.requests.size()) continue;
    const ScaledRequest& r = t.requests[id];
    switch (r.growth) {
      case ScaledRequest::Growth::kFixed: op.bytes = rounded(r.fixed_bytes); break;
      case ScaledRequest::Growth::kPerSample:
        op.bytes = rounded(r.fixed_bytes + r.bytes_per_token * l + r.bytes_per_token2 * l * l);
        break;
      case ScaledRequest::Growth::kStaging:
        op.bytes = rounded(std::min(std::ceil(static_cast<double>(r.traced_bytes) * l / l0),
                                    static_cast<double>(t.staging_cap.value_or(r.traced_bytes))));
        break;
      case ScaledRequest::Growth::kWorkspace: {
        // Grown as a layer's scores grow (the square of the length), or held.
        const bool hold = w == WorkspaceGrowth::kHeld && l >= l0;
        op.bytes = hold ? r.traced_bytes : rounded(std::ceil(static_cast<double>(r.traced_bytes) * (l / l0) * (l / l0)));
        break;
      }
    }
  }
  return ops;
}

namespace {

std::pair<std::int64_t, ReplayResult> longest_fitting(const ScaledTrace& t, const ReplayAllocator& a, WorkspaceGrowth w) {
  const auto run = [&](std::int64_t l) { return replay(ops_at_length(t, l, w), a); };
  std::int64_t lo = 0, hi = 0;
  ReplayResult above;
  ReplayResult at = run(t.length);
  if (at.completed) {
    lo = t.length;
    for (std::int64_t next = std::min(2 * lo, limits::kMaxSequenceLength);; next = std::min(2 * lo, limits::kMaxSequenceLength)) {
      ReplayResult r = run(next);
      if (!r.completed) {
        hi = next;
        above = std::move(r);
        break;
      }
      lo = next;
      if (lo == limits::kMaxSequenceLength) return {lo, ReplayResult{}};
    }
  } else {
    hi = t.length;
    above = std::move(at);
  }
  return bisect(lo, hi, std::move(above), run);
}

}  // namespace

ReplayCapacity replay_length_capacity(const ScaledTrace& t, double budget_mib, std::int64_t limit_bytes) {
  ReplayCapacity c = capacity_by(t, budget_mib, limit_bytes, longest_fitting);
  c.traced_batch = t.length;
  c.other_batch = t.other_lengths.empty() ? 0 : t.other_lengths.front();
  return c;
}

}  // namespace memdiag
