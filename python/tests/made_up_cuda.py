"""A CUDA probe whose readings are made up (memdiag/native/readings.hpp's
FakeReadings, MEMDIAG_NATIVE_TEST=1): the recorder's CUDA path on a machine
without a device, for test_recorder_lane.py and
scripts/recorder-overhead-steady.py --made-up-readings."""
import os

os.environ["MEMDIAG_NATIVE_TEST"] = "1"

import torch  # noqa: E402

from memdiag import _native, _probe  # noqa: E402

NATIVE = None if torch.cuda.is_available() else _native.load()


class FakeCudaProbe(_probe.CudaProbe):
    """CudaProbe with the made-up readings: what the recorder does on CUDA,
    on this machine's CPU."""

    def __init__(self, device):  # noqa: D107 (CudaProbe's own asks the driver)
        self.device = torch.device("cuda", 0)
        self._nvml = None
        self._nvml_used_at = None
        self._nvml_last = None
        self._index = 0
        self._mem_get_info = None
        self._used = None
        self._used_reserved = None
        self.native = NATIVE
        self.native_why = None
        self.nvml_calls = 0

    def sync(self):
        pass

    def begin_phase(self):
        self.native.reset_peak(0)

    def _process_mib(self):
        # NVML, made up: the lane must ask it exactly where the Python does
        # (each call a new figure).
        self.nvml_calls += 1
        return float(self.nvml_calls)

    def environment(self):
        return {"device_name": "made-up readings", "device_total_mib": 81920.0, "cuda_runtime_version": "13.0",
                "driver_version": None}

    def memory_limit_mib(self):
        return None

    def oom_state(self, request_bytes=None):
        return None
