"""A fake `pynvml` (nvidia-ml-py) over the simulated GPU of fakegpu.py.

TEST DOUBLE: the tool's NVML code runs against it on machines without a GPU. It implements only the
calls vllm_fit/gpu.py makes, with NVML's names and byte units. `devices` in the world file sets how
many identical devices there are (default 1).
"""

from __future__ import annotations

import os
import sys
from types import SimpleNamespace

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fakegpu

_inits = 0


class NVMLError(Exception):
    pass


class NVMLError_LibraryNotFound(NVMLError):
    pass


class NVMLError_GpuIsLost(NVMLError):
    pass


def nvmlInit():
    global _inits
    if os.environ.get("FAKE_NVML_MISSING"):
        raise NVMLError_LibraryNotFound("NVML Shared Library Not Found")
    spec = fakegpu.world()
    if spec.get("gpu_lost_after") and fakegpu.counter(spec, "engines") >= spec["gpu_lost_after"]:
        raise NVMLError_GpuIsLost("GPU is lost")  # the device fell off the bus after that many engine starts
    _inits += 1


def nvmlShutdown():
    global _inits
    _inits -= 1


def _spec():
    if _inits <= 0:
        raise NVMLError("Uninitialized")
    return fakegpu.world()


def nvmlDeviceGetCount():
    return int(_spec().get("devices", 1))


def nvmlDeviceGetHandleByIndex(index):
    if index >= nvmlDeviceGetCount():
        raise NVMLError("Invalid Argument")
    return index


def nvmlDeviceGetHandleByUUID(uuid):
    return int(str(uuid).rsplit("-", 1)[1])


def nvmlDeviceGetIndex(handle):
    return handle


def nvmlDeviceGetUUID(handle):
    return "GPU-fake-%d" % handle


def nvmlDeviceGetName(handle):
    return "NVIDIA Fake H100 80GB HBM3"


def nvmlDeviceGetMemoryInfo(handle):
    spec = _spec()
    total = int(spec["total_gib"] * fakegpu.GIB)
    used = int(fakegpu.used_gib(spec) * fakegpu.GIB)
    return SimpleNamespace(total=total, used=used, free=total - used)


def nvmlDeviceGetComputeRunningProcesses(handle):
    return [SimpleNamespace(pid=pid, usedGpuMemory=int(gib * fakegpu.GIB))
            for pid, _, gib in fakegpu.allocations(_spec())]


def nvmlDeviceGetGraphicsRunningProcesses(handle):
    return []


def nvmlSystemGetProcessName(pid):
    for other_pid, name, _ in fakegpu.allocations(_spec()):
        if other_pid == pid:
            return name
    raise NVMLError("Not Found")


def nvmlSystemGetDriverVersion():
    return "550.54.15"
