// Must not build: see tests/layering/CMakeLists.txt.
#include "memdiag/harness_options.hpp"
