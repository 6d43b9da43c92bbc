"""The device side, through NVML (nvidia-ml-py): preflight, waiting for memory to come back, peaks.

No nvidia-smi text is parsed. Without NVML or a GPU (the CPU backend) everything here says so in
one line and steps aside: the runner's wait for the trial's process group is then the only wait.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Mapping, Optional

import psutil

from .errors import EnvironmentProblem

MIB = 1 << 20
RELEASE_TOLERANCE_BYTES = 256 * MIB
"""Device memory within this much of the pre-trial level counts as released."""
RELEASE_TIMEOUT_S = 60.0


def _nvml():
    """The pynvml module, initialised; raises when NVML (or a driver) is not there."""
    import pynvml  # nvidia-ml-py

    pynvml.nvmlInit()
    return pynvml


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@dataclass
class GpuProcess:
    """A process holding memory on a device (as NVML sees it)."""

    pid: int
    name: str
    used_bytes: Optional[int]


@dataclass
class DeviceState:
    """One device's memory and who holds it, at one moment."""

    index: int
    uuid: str
    name: str
    total_bytes: int
    free_bytes: int
    used_bytes: int
    processes: List[GpuProcess] = field(default_factory=list)


@dataclass
class Preflight:
    """What the devices looked like before the first trial."""

    available: bool
    reason: str
    driver: Optional[str] = None
    devices: List[DeviceState] = field(default_factory=list)
    visible_count: Optional[int] = None
    """Devices CUDA would show (None without NVML)."""

    @property
    def held_by_others(self) -> List[GpuProcess]:
        """Processes that hold memory on the devices the trials will use."""
        return [proc for device in self.devices for proc in device.processes]

    @property
    def total_bytes(self) -> Optional[int]:
        return min(d.total_bytes for d in self.devices) if self.devices else None

    @property
    def free_bytes(self) -> Optional[int]:
        return min(d.free_bytes for d in self.devices) if self.devices else None

    def utilization_cap(self) -> Optional[float]:
        """The highest utilization (0.01 steps) with total x utilization within free memory."""
        if not self.devices:
            return None
        return min(math.floor(d.free_bytes / d.total_bytes * 100) / 100 for d in self.devices)

    def as_dict(self) -> Dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Preflight:
        """Rebuild from as_dict (a report's `environment.preflight`); KeyError/TypeError for anything else."""
        devices = [DeviceState(**dict(device, processes=[GpuProcess(**process) for process in device["processes"]]))
                   for device in data["devices"]]
        return cls(bool(data["available"]), str(data["reason"]), data.get("driver"), devices,
                   data.get("visible_count"))


def visible_devices(env: Mapping[str, str], count: int) -> List[str]:
    """NVML indices ("0") or UUIDs ("GPU-...") of the devices CUDA will show, in CUDA's order."""
    value = env.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return [str(i) for i in range(count)]
    entries = [part.strip() for part in value.split(",")]
    visible = []
    for entry in entries:
        if not entry or entry.startswith("-"):
            break  # CUDA stops at the first invalid entry
        visible.append(entry)
    return visible


def _handle(nvml, entry: str):
    if entry.isdigit():
        return nvml.nvmlDeviceGetHandleByIndex(int(entry))
    return nvml.nvmlDeviceGetHandleByUUID(entry)


def _process_name(nvml, pid: int) -> str:
    try:
        return _text(nvml.nvmlSystemGetProcessName(pid))
    except Exception:  # NVML may refuse (other containers): fall back to psutil, then to "?"
        try:
            return psutil.Process(pid).name()
        except psutil.Error:
            return "?"


def _device_state(nvml, entry: str) -> DeviceState:
    handle = _handle(nvml, entry)
    memory = nvml.nvmlDeviceGetMemoryInfo(handle)
    processes = []
    for getter in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
        for proc in getattr(nvml, getter)(handle):
            used = getattr(proc, "usedGpuMemory", None)
            processes.append(GpuProcess(int(proc.pid), _process_name(nvml, int(proc.pid)),
                                        int(used) if isinstance(used, int) else None))
    index = nvml.nvmlDeviceGetIndex(handle) if hasattr(nvml, "nvmlDeviceGetIndex") else int(entry or 0)
    return DeviceState(int(index), _text(nvml.nvmlDeviceGetUUID(handle)), _text(nvml.nvmlDeviceGetName(handle)),
                       int(memory.total), int(memory.free), int(memory.used), processes)


class Devices:
    """The devices a search's trials use: preflight, release wait, peak sampling."""

    def __init__(self, env: Mapping[str, str], tensor_parallel_size: int):
        self.env, self.count = env, tensor_parallel_size
        self.preflight = self._preflight()

    def _preflight(self) -> Preflight:
        try:
            nvml = _nvml()
        except Exception as exc:  # ImportError, NVMLError_LibraryNotFound, DriverNotLoaded ...
            return Preflight(False, "no NVML here (%s): no GPU preflight; the CPU backend or another"
                             " accelerator is assumed" % type(exc).__name__)
        try:
            count = nvml.nvmlDeviceGetCount()
            visible = visible_devices(self.env, count)
            if len(visible) < self.count:
                return Preflight(False, "only %d visible device(s) for tensor-parallel size %d"
                                 % (len(visible), self.count), visible_count=len(visible))
            try:
                devices = [_device_state(nvml, entry) for entry in visible[:self.count]]
            except Exception as exc:  # NVMLError_InvalidArgument / NotFound for a bad CUDA_VISIBLE_DEVICES
                raise EnvironmentProblem("CUDA_VISIBLE_DEVICES=%s names a device NVML does not know (%d device(s)"
                                         " here: %s); fix CUDA_VISIBLE_DEVICES"
                                         % (self.env.get("CUDA_VISIBLE_DEVICES"), count,
                                            type(exc).__name__)) from None
            return Preflight(True, "ok", _text(nvml.nvmlSystemGetDriverVersion()), devices, len(visible))
        finally:
            nvml.nvmlShutdown()

    def snapshot(self) -> List[DeviceState]:
        """The devices' state now (empty without NVML)."""
        if not self.preflight.available:
            return []
        try:
            nvml = _nvml()
        except Exception:  # the driver went away mid-search: no wait, no peak, never a crash
            return []
        try:
            return [_device_state(nvml, str(d.uuid)) for d in self.preflight.devices]
        except Exception:
            return []
        finally:
            nvml.nvmlShutdown()

    def wait_released(self, baseline: List[DeviceState], timeout_s: float = RELEASE_TIMEOUT_S) -> Dict[str, Any]:
        """Wait (bounded) until each device's used memory is back to its pre-trial level.

        `released` is None when there is no device view to watch (no NVML): nobody knows.
        """
        if not baseline:
            return {"waited_s": 0.0, "released": None}
        started = time.monotonic()
        while True:
            now = self.snapshot()
            if len(now) != len(baseline):  # NVML failed (a device lost, the driver gone): nobody can tell
                return {"waited_s": round(time.monotonic() - started, 2), "released": None, "view_lost": True,
                        "note": LOST_VIEW}
            back = all(cur.used_bytes <= base.used_bytes + RELEASE_TOLERANCE_BYTES
                       for cur, base in zip(now, baseline))
            waited = time.monotonic() - started
            if back or waited >= timeout_s:
                return {"waited_s": round(waited, 2), "released": back,
                        "used_bytes": [d.used_bytes for d in now]}
            time.sleep(0.5)

    def sampler(self) -> PeakSampler:
        return PeakSampler(self)


LOST_VIEW = "the device view was lost (NVML failed during the search): no release wait and no peak since"


class PeakSampler:
    """Samples device memory while a trial runs; `peak_used_bytes` is the highest seen (per device)."""

    INTERVAL_S = 0.5

    def __init__(self, devices: Devices):
        self.devices = devices
        self.peak_used_bytes: List[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> PeakSampler:
        if self.devices.preflight.available:
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.is_set():
            used = [d.used_bytes for d in self.devices.snapshot()]
            self.peak_used_bytes = [max(a, b) for a, b in zip(self.peak_used_bytes, used)] or used
            self._stop.wait(self.INTERVAL_S)

