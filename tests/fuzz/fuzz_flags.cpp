// libFuzzer: the flag parsers.
#include "fuzz_targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  memdiag::fuzz::flag_parser(data, size);
  return 0;
}
