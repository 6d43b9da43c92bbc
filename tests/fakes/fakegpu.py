"""A simulated GPU shared by the fake vLLM (trial processes) and the fake NVML (the tool's process).

TEST DOUBLE: it stands in for device memory, which this CPU-only machine does not have. The world
file (path in $FAKE_GPU_WORLD) describes the device and the model; each fake engine records what it
holds in state_dir/alloc-<pid>.json, and the memory counts as held while that process lives, and
for `release_delay_s` after it is seen dead (the slow release of a real driver).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

GIB = 1 << 30


def world() -> Dict[str, Any]:
    """The world description ($FAKE_GPU_WORLD)."""
    return json.loads(Path(os.environ["FAKE_GPU_WORLD"]).read_text())


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie still answers kill(0) but holds nothing
        with open("/proc/%d/stat" % pid) as handle:
            return handle.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def allocations(spec: Dict[str, Any]) -> List[Tuple[int, str, float]]:
    """(pid, name, GiB) of every holder: the world's other processes, then fake engines still holding."""
    held = [(int(p["pid"]), p["name"], float(p["gib"])) for p in spec.get("others", [])]
    state = Path(spec["state_dir"])
    now = time.time()
    for path in sorted(state.glob("alloc-*.json")):
        try:
            alloc = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if not _pid_alive(alloc["pid"]):
            if alloc.get("dead_since") is None:
                alloc["dead_since"] = now
                path.write_text(json.dumps(alloc))
            if now - alloc["dead_since"] >= spec.get("release_delay_s", 0):
                path.unlink()
                continue
        held.append((alloc["pid"], "fake-vllm", float(alloc["gib"])))
    return held


def used_gib(spec: Dict[str, Any], exclude_pid: int = -1) -> float:
    return sum(gib for pid, _, gib in allocations(spec) if pid != exclude_pid)


def hold(spec: Dict[str, Any], gib: float) -> None:
    """Record that this process now holds `gib` of device memory."""
    path = Path(spec["state_dir"]) / ("alloc-%d.json" % os.getpid())
    path.write_text(json.dumps({"pid": os.getpid(), "gib": gib, "dead_since": None}))


def bump_counter(spec: Dict[str, Any], name: str) -> int:
    """Increment and return a counter kept in the state dir (for flaky behaviour across trials)."""
    path = Path(spec["state_dir"]) / ("count-%s" % name)
    count = int(path.read_text()) + 1 if path.exists() else 1
    path.write_text(str(count))
    return count
