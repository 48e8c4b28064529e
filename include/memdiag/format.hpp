// Number formatting shared by the analysis's sentences and the renderers'
// tables, so a figure reads the same in both.
#pragma once

#include <string>

namespace memdiag {

// A MiB figure with as many decimals as it needs to stay meaningful: 140.4,
// 65.13, 0.256, 0.0636; anything under 0.00005 is "0.00". No unit.
std::string format_mib(double v);

}  // namespace memdiag
