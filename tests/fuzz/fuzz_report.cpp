// libFuzzer: the report reader followed by the analysis and every renderer.
#include "fuzz_targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  memdiag::fuzz::report_pipeline(data, size);
  return 0;
}
