#include "memdiag/format.hpp"

#include <cmath>
#include <cstdio>

namespace memdiag {

std::string format_mib(double v) {
  const double a = std::fabs(v);
  if (a < 5e-5) return "0.00";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", a >= 100 ? 1 : (a >= 1 ? 2 : (a >= 0.01 ? 3 : 4)), v);
  return buf;
}

}  // namespace memdiag
