#pragma once

#include "memdiag/report.hpp"

#include <c10/core/Device.h>

namespace memdiag {

// Device name and size, library versions, host and start time.
Environment describe_environment(const c10::Device& device);

}  // namespace memdiag
