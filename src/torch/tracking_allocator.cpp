#include "memdiag/tracking_allocator.hpp"

#include "memdiag/allocation_tracer.hpp"
#include "memdiag/format.hpp"

#include <c10/core/Allocator.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

namespace memdiag {
namespace {

// c10 aligns CPU tensors to 64 bytes; the size header takes one such slot so
// the data pointer keeps that alignment.
constexpr std::size_t kAlign = 64;
constexpr std::size_t kHeader = kAlign;

std::atomic<std::int64_t> g_current{0};
std::atomic<std::int64_t> g_peak{0};
std::atomic<std::int64_t> g_limit{-1};  // -1: no limit
// The last refusal, for the report (0 request: none since the last read).
std::atomic<std::int64_t> g_refused_request{0};
std::atomic<std::int64_t> g_refused_in_use{0};
std::atomic<std::int64_t> g_refused_limit{0};

void raise_peak(std::int64_t now) {
  std::int64_t p = g_peak.load(std::memory_order_relaxed);
  while (now > p && !g_peak.compare_exchange_weak(p, now, std::memory_order_relaxed)) {
  }
}

// Allocations made on a thread inside a HostStaging scope: the host's.
thread_local int t_staging = 0;

// The header holds the size and whether it was counted, so one deleter
// (also the raw deleter, which gets no context) frees both kinds.
struct Header {
  std::size_t bytes;
  bool counted;
};
static_assert(sizeof(Header) <= kHeader, "the header fits its slot");

void tracked_free(void* data) {
  if (data == nullptr) return;
  char* base = static_cast<char*>(data) - kHeader;
  Header h;
  std::memcpy(&h, base, sizeof h);
  if (h.counted) {
    g_current.fetch_sub(static_cast<std::int64_t>(h.bytes), std::memory_order_relaxed);
    tracer::cpu_freed(data);
  }
  std::free(base);
}

std::string mib_text(std::int64_t bytes) { return memdiag::format_fixed(static_cast<double>(bytes) / (1024.0 * 1024.0), 2); }

class Allocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(std::size_t n) override {
    if (n == 0) return {nullptr, nullptr, &tracked_free, c10::Device(c10::DeviceType::CPU)};
    if (t_staging > 0) {
      void* base = nullptr;
      TORCH_CHECK_WITH(OutOfMemoryError, posix_memalign(&base, kAlign, n + kHeader) == 0 && base != nullptr,
                       "host out of memory: tried to allocate ", n, " bytes");
      const Header h{n, false};
      std::memcpy(base, &h, sizeof h);
      void* data = static_cast<char*>(base) + kHeader;
      return {data, data, &tracked_free, c10::Device(c10::DeviceType::CPU)};
    }
    const auto want = static_cast<std::int64_t>(n);
    const std::int64_t limit = g_limit.load(std::memory_order_relaxed);
    const std::int64_t now = g_current.fetch_add(want, std::memory_order_relaxed) + want;
    if (limit >= 0 && now > limit) {
      g_current.fetch_sub(want, std::memory_order_relaxed);
      g_refused_in_use.store(now - want);
      g_refused_limit.store(limit);
      g_refused_request.store(want);
      tracer::cpu_refused(want);
      // In MiB, as the report and PyTorch's own CUDA message say it.
      TORCH_CHECK_WITH(OutOfMemoryError, false, "CPU out of memory (memdiag simulated limit): tried to allocate ",
                       mib_text(want), " MiB with ", mib_text(now - want), " MiB of ", mib_text(limit),
                       " MiB in use");
    }
    void* base = nullptr;
    if (posix_memalign(&base, kAlign, n + kHeader) != 0 || base == nullptr) {
      g_current.fetch_sub(want, std::memory_order_relaxed);
      // Under a simulated limit the host refusing first (ulimit -v, a small
      // machine) is not the limit's out-of-memory: the run failed, and says
      // why, rather than reporting an OOM at a budget it never reached.
      TORCH_CHECK(limit < 0, "the host refused ", n, " bytes with ", now - want, " bytes in use, below memdiag's ",
                  "simulated limit of ", limit, " bytes (ulimit -v or the machine's memory): not the limit's ",
                  "out-of-memory");
      TORCH_CHECK_WITH(OutOfMemoryError, false, "CPU out of memory: tried to allocate ", n, " bytes");
    }
    const Header h{n, true};
    std::memcpy(base, &h, sizeof h);
    raise_peak(now);
    void* data = static_cast<char*>(base) + kHeader;
    tracer::cpu_allocated(data, want);
    // Context must equal data: LibTorch's raw_allocate asserts it.
    return {data, data, &tracked_free, c10::Device(c10::DeviceType::CPU)};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &tracked_free; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
};

}  // namespace

HostStaging::HostStaging() { ++t_staging; }
HostStaging::~HostStaging() { --t_staging; }

CpuTrackingAllocator& CpuTrackingAllocator::install() {
  // Leaked on purpose: tensors freed during static destruction still need
  // their deleter's counters to exist.
  static CpuTrackingAllocator* instance = [] {
    static Allocator* alloc = new Allocator();
    // Priority above the default CPU allocator's, so ours wins.
    c10::SetAllocator(c10::DeviceType::CPU, alloc, /*priority=*/1);
    return new CpuTrackingAllocator();
  }();
  return *instance;
}

std::int64_t CpuTrackingAllocator::current_bytes() const { return g_current.load(); }
std::int64_t CpuTrackingAllocator::peak_bytes() const { return g_peak.load(); }
void CpuTrackingAllocator::reset_peak() { g_peak.store(g_current.load()); }

void CpuTrackingAllocator::set_limit(std::optional<std::int64_t> bytes) {
  g_limit.store(bytes ? *bytes : -1);
}

std::optional<CpuTrackingAllocator::Refusal> CpuTrackingAllocator::take_refusal() {
  const std::int64_t request = g_refused_request.exchange(0);
  if (request == 0) return std::nullopt;
  return Refusal{request, g_refused_in_use.load(), g_refused_limit.load()};
}

std::optional<std::int64_t> CpuTrackingAllocator::limit() const {
  const std::int64_t l = g_limit.load();
  return l < 0 ? std::nullopt : std::optional<std::int64_t>(l);
}

}  // namespace memdiag
