// Must not build: see tests/layering/CMakeLists.txt.
#include "memdiag/render.hpp"
