// torch.autocast(device, dtype=bfloat16) for a
// scope. LibTorch 2.11 has the at::autocast functions but no guard; this one
// saves and restores the device's autocast state, keeps the nesting count
// that decides when the cast cache is cleared, and clears it on leaving the
// outermost scope, as the Python context manager does.
#pragma once

#include <ATen/autocast_mode.h>

namespace memdiag {

class AutocastGuard {
 public:
  AutocastGuard(c10::DeviceType device, at::ScalarType dtype)
      : device_(device),
        was_enabled_(at::autocast::is_autocast_enabled(device)),
        was_dtype_(at::autocast::get_autocast_dtype(device)) {
    at::autocast::set_autocast_enabled(device_, true);
    at::autocast::set_autocast_dtype(device_, dtype);
    at::autocast::increment_nesting();
  }
  ~AutocastGuard() {
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    at::autocast::set_autocast_enabled(device_, was_enabled_);
    at::autocast::set_autocast_dtype(device_, was_dtype_);
  }
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  c10::DeviceType device_;
  bool was_enabled_;
  at::ScalarType was_dtype_;
};

}  // namespace memdiag
