#include "memdiag/host_memory.hpp"

#include <unistd.h>

#include <fstream>

namespace memdiag {

std::optional<double> host_resident_mib() {
  // statm: size resident shared text lib data dt, in pages. A stream read
  // each phase costs a few microseconds against a phase's milliseconds.
  std::ifstream in("/proc/self/statm");
  long long size = 0, resident = 0;
  if (!(in >> size >> resident)) return std::nullopt;
  const long page = sysconf(_SC_PAGESIZE);
  if (page <= 0) return std::nullopt;
  return static_cast<double>(resident) * static_cast<double>(page) / (1024.0 * 1024.0);
}

}  // namespace memdiag
