// Counting CPU allocator: every CPU tensor storage made through c10's CPU allocator is counted
// (current and peak bytes). Independent of memdiag and of the profiler.
#include <torch/extension.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/Allocator.h>
#include <mutex>
#include <unordered_map>
#include <cstdlib>
#include <cstring>
static std::mutex mu;
static std::unordered_map<void*, size_t> sizes;
static int64_t cur = 0, peak = 0, nalloc = 0;
static void del(void* p) {
  if (!p) return;
  {
    std::lock_guard<std::mutex> g(mu);
    auto it = sizes.find(p);
    if (it != sizes.end()) { cur -= (int64_t)it->second; sizes.erase(it); }
  }
  std::free(p);
}
struct CountingAlloc final : c10::Allocator {
  c10::DataPtr allocate(size_t n) override {
    void* p = nullptr;
    if (n > 0) {
      if (posix_memalign(&p, 64, n) != 0 || !p) throw std::bad_alloc();
      std::lock_guard<std::mutex> g(mu);
      sizes[p] = n; cur += (int64_t)n; ++nalloc; if (cur > peak) peak = cur;
    }
    return {p, p, &del, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &del; }
  void copy_data(void* d, const void* s, std::size_t n) const override { std::memcpy(d, s, n); }
};
static CountingAlloc alloc;
void install() { c10::SetCPUAllocator(&alloc, /*priority=*/200); }
int64_t current() { std::lock_guard<std::mutex> g(mu); return cur; }
int64_t get_peak() { std::lock_guard<std::mutex> g(mu); return peak; }
int64_t count() { std::lock_guard<std::mutex> g(mu); return nalloc; }
void reset_peak() { std::lock_guard<std::mutex> g(mu); peak = cur; }
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("install", &install); m.def("current", &current); m.def("peak", &get_peak);
  m.def("count", &count); m.def("reset_peak", &reset_peak);
}
