// libFuzzer: the plan-file reader and the namer.
#include "fuzz_targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  memdiag::fuzz::plan_reader(data, size);
  return 0;
}
