// Must not build: see tests/layering/CMakeLists.txt. The run layer plans and
// orders runs without LibTorch: none of its headers is on its path.
#include <c10/core/Device.h>
