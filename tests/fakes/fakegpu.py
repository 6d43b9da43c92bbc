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


def counter(spec: Dict[str, Any], name: str) -> int:
    """A counter of the state dir, without changing it."""
    path = Path(spec["state_dir"]) / ("count-%s" % name)
    return int(path.read_text()) if path.exists() else 0


class EngineError(Exception):
    """What a fake engine start-up refuses with: `kind` names the vLLM error it renders as."""

    def __init__(self, kind: str, **numbers: Any):
        super().__init__(kind)
        self.kind, self.numbers = kind, numbers


def plan_engine(spec: Dict[str, Any], max_model_len: Any, utilization: Any, kv_cache_memory_bytes: Any,
                others_bytes: float) -> Dict[str, Any]:
    """vLLM's start-up accounting (vllm-strings.md 3a, 4c, 4d, 2b, 1d) for one candidate.

    Returns the engine's numbers, or raises EngineError with the numbers its message needs.
    The fake vLLM renders these as log lines and errors; pure tests use them directly.
    """
    import math

    derived = spec.get("derived_max_len", 131072)
    util = 0.9 if utilization is None else utilization
    total = spec["total_gib"] * GIB
    if max_model_len is not None and max_model_len > derived:
        raise EngineError("too_long_for_model", requested=max_model_len, derived=derived)
    free = total - others_bytes
    requested = math.ceil(total * util)
    if free < requested:
        raise EngineError("free_memory_short", free=free, total=total, util=util, requested=requested)
    weights = spec["weights_gib"] * GIB
    if weights > requested:
        raise EngineError("oom", alloc=weights, free=max(0.0, requested - weights))
    block_size = spec.get("block_size", 16)
    page = block_size * spec["kv_bytes_per_token"]
    if kv_cache_memory_bytes is not None:
        available = kv_cache_memory_bytes
    else:
        available = requested - weights - spec.get("activation_gib", 0) * GIB
    if available <= 0:
        raise EngineError("no_kv_memory", available=available)
    num_blocks = int(available // page)
    longest = max(0, num_blocks - 1) * block_size
    length = derived if max_model_len is None else max_model_len
    autofit = None
    if length == -1:
        if longest < 1:
            raise EngineError("autofit_failed")
        length = autofit = min(derived, longest)
    needed_blocks = -(-length // block_size) + 1
    if needed_blocks > num_blocks:
        raise EngineError("kv_too_small", length=length, needed=needed_blocks * page, available=available,
                          estimate=longest)
    budget = requested if kv_cache_memory_bytes is None else weights + available
    overhead = spec.get("request_overhead_gib", 0) * GIB
    return {"max_model_len": length, "autofit": autofit, "num_blocks": num_blocks, "block_size": block_size,
            "available": available, "budget": budget, "total": total, "weights": weights, "util": util,
            "request_ok": budget + overhead <= total - others_bytes, "overhead": overhead,
            "free_at_request": total - others_bytes - budget, "derived": derived,
            "bare_oom": spec.get("bare_oom", False)}


def log_line(level: str, message: str) -> str:
    """A log record as vLLM 0.31+ prints it."""
    stamp = time.strftime("%m-%d %H:%M:%S")
    return "(EngineCore pid=%d) %s %s [fake_engine.py:1] %s" % (os.getpid(), level, stamp, message)


def _gib(value: float) -> str:
    return str(round(value / GIB, 2))


def start_log(plan: Dict[str, Any], others_bytes: float, kv_set: bool) -> List[str]:
    """The INFO messages of a successful start (vllm-strings.md 1c, 1b, 1d)."""
    lines = ["Model loading took %.4f GiB memory and 1.000000 seconds" % (plan["weights"] / GIB)]
    if not kv_set:
        lines.append("Free memory on device (%s/%s GiB) on startup. Desired GPU memory utilization is (%s, %s GiB)."
                     " Actual usage is 14.0 GiB for weight." % (_gib(plan["total"] - others_bytes),
                                                                _gib(plan["total"]), plan["util"],
                                                                _gib(plan["budget"])))
    lines.append("Available KV cache memory: %s GiB" % _gib(plan["available"]))
    if plan["autofit"] is not None:
        lines.append("Auto-fit max_model_len: reduced from %d to %d to fit in available KV cache memory (%s GiB GPU)"
                     % (plan["derived"], plan["autofit"], _gib(plan["available"])))
    length = plan["max_model_len"]
    concurrency = plan["num_blocks"] / (-(-length // plan["block_size"]))
    lines.append(f"GPU KV cache size: {int(concurrency * length):,} tokens, "
                 f"Maximum concurrency for {length:,} tokens per request: {concurrency:.2f}x"
                 )
    return lines


def request_oom_message(plan: Dict[str, Any]) -> str:
    """torch's OOM message for the verification request (vllm-strings.md 3c); bare: no numbers."""
    if plan.get("bare_oom"):
        return "CUDA error: out of memory"
    return ("CUDA out of memory. Tried to allocate %s GiB. GPU 0 has a total capacity of %s GiB of which %s GiB is"
            " free." % (_gib(plan["overhead"]), _gib(plan["total"]), _gib(max(0.0, plan["free_at_request"]))))


def render_error(error: EngineError) -> Tuple[str, str]:
    """(exception type, verbatim message) vLLM raises for a start-up failure."""
    n = error.numbers
    if error.kind == "too_long_for_model":
        return "ValueError", (
            "1 validation error for ModelConfig\n  Value error, User-specified max_model_len (%d) is greater than"
            " the derived max_model_len (max_position_embeddings=%s.0 or model_max_length=None in model's"
            " config.json). To allow overriding this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1."
            % (n["requested"], n["derived"]))
    if error.kind == "free_memory_short":
        return "ValueError", (
            "Free memory on device cuda:0 (%s/%s GiB) on startup is less than desired GPU memory utilization (%s,"
            " %s GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes."
            % (_gib(n["free"]), _gib(n["total"]), n["util"], _gib(n["requested"])))
    if error.kind == "oom":
        return "RuntimeError", ("CUDA out of memory. Tried to allocate %s GiB. GPU 0 has a total capacity of 80 GiB"
                                " of which %s GiB is free." % (_gib(n["alloc"]), _gib(n["free"])))
    if error.kind == "no_kv_memory":
        return "ValueError", ("No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when"
                              " initializing the engine. See https://docs.vllm.ai/en/latest/configuration/"
                              "conserving_memory/ for more details.")
    if error.kind == "autofit_failed":
        return "ValueError", ("Cannot auto-fit max_model_len: not enough GPU memory available to serve even a single"
                              " token. Try increasing `gpu_memory_utilization`.")
    estimate = ("Based on the available memory, the estimated maximum model length is %d. " % n["estimate"]
                if n["estimate"] > 0 else "")
    return "ValueError", (
        "To serve at least one request with the model's max seq len (%d), (%s GiB KV cache is needed, which is larger"
        " than the available KV cache memory (%s GiB). %sTry increasing `gpu_memory_utilization` or decreasing"
        " `max_model_len` when initializing the engine." % (n["length"], _gib(n["needed"]), _gib(n["available"]),
                                                            estimate))
