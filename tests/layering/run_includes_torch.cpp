// Must not build: see tests/layering/CMakeLists.txt.
#include "memdiag/probes.hpp"
