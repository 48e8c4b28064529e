// Must not build: see tests/layering/CMakeLists.txt.
#include "memdiag/analysis.hpp"
