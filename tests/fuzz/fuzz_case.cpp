// libFuzzer: the case-file reader.
#include "fuzz_targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  memdiag::fuzz::case_reader(data, size);
  return 0;
}
