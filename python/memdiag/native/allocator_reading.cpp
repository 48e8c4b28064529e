// One call for every allocator figure the recorder samples at a phase's end.
//
// torch.cuda's Python API builds a nested dict of every statistic the
// caching allocator keeps (torch._C._cuda_memoryStats: 12-18 us idle on the
// H200, about three times that inside a training loop) for the four the
// recorder reads. This reads them from the allocator's DeviceStats struct
// directly and, in the same call, resets the peak for the next phase and
// asks cudaMemGetInfo where wanted; and counts the census's gradients
// (gradient_bytes) without a Python object a gradient; reads the host's
// figures (host_figures) and keeps each step's loss (Losses) the same way.
// Built on first use by torch.utils.cpp_extension against the torch that
// runs the job
// (memdiag/_native.py); the recorder falls back to the Python API without it.
#include "readings.hpp"

namespace py = pybind11;
using namespace memdiag_native;

void define_lane(py::module_& m);  // steady_lane.cpp

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "memdiag's allocator readings in one call";
  m.def("read", &read_figures, py::arg("device"), py::arg("reset_peak"), py::arg("device_used"));
  m.def("allocated", &allocated, py::arg("device"));
  m.def("reset_peak", &reset_peak, py::arg("device"));
  m.def("largest_cached_block", &largest_cached_block, py::arg("device"));
  m.def("gradient_bytes", &gradient_bytes, py::arg("params"), py::arg("device"));
  m.def("host_figures", &host_figures, py::arg("statm_fd"), py::arg("pinned"));
  py::class_<Losses>(m, "Losses").def(py::init<>()).def("add", &Losses::add).def("values", &Losses::values);
  define_lane(m);
}
