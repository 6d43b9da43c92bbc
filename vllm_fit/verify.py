"""`vllm-fit verify`: launch a committed config once, serve the full-length request, compare capacity.

The cheap nightly check after a vLLM, driver or hardware change: one launch per config. It fails
when the config no longer starts or serves, or when the KV capacity fell by more than the
tolerance below what was recorded when the config was fitted (its `# kv-cache-tokens:` line).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional

from .export.yaml_config import read_comment_facts, read_config
from .gpu import Devices
from .outcome import Outcome
from .runner import trial_environment
from .study import Listener
from .trial import run_trial

DEFAULT_TOLERANCE = 0.05
"""Capacity may fall by up to 5% (vLLM versions count tokens slightly differently) before failing."""


def recorded_capacity(path: Path) -> Optional[int]:
    """The KV capacity in tokens recorded when the config was fitted, if it was."""
    value = read_comment_facts(path).get("kv-cache-tokens")
    return int(value) if value and value.isdigit() else None


def verify_config(path: Path, python: str, env: Mapping[str, str], timeout_s: float, tolerance: float,
                  listener: Listener, devices: Optional[Devices] = None, index: int = 1) -> Dict[str, Any]:
    """One launch of the config; the verdict with its evidence."""
    kwargs = read_config(path)
    before = recorded_capacity(path)
    baseline = devices.snapshot() if devices else []
    listener.trial_started(index, kwargs)
    with tempfile.TemporaryDirectory(prefix="vllm-fit-verify-") as work:
        record = run_trial(index, python, kwargs, Path(work), timeout_s=timeout_s, env=trial_environment(env),
                           on_phase=lambda phase: listener.phase(index, phase))
    listener.trial_finished(record)
    if devices:
        record.device = devices.wait_released(baseline)
    now = record.facts.kv_cache_tokens
    if record.outcome is not Outcome.OK:
        status, message = "failed", "no longer starts and serves: %s: %s" % (record.outcome.value, record.detail)
    elif before and now is not None and now < before * (1 - tolerance):
        status, message = "failed", "KV capacity dropped from %d to %d tokens (%.1f%%, tolerance %.0f%%)" % (
            before, now, 100.0 * (now - before) / before, 100 * tolerance)
    else:
        status = "ok"
        message = "starts and serves %s tokens; KV capacity %s tokens (recorded %s)" % (
            (record.request or {}).get("total_tokens"), now, before)
    return {"config": str(path), "status": status, "message": message, "recorded_kv_cache_tokens": before,
            "kv_cache_tokens": now, "duration_s": record.duration_s, "trial": record.to_json()}


def verify_all(paths: List[Path], python: str, env: Mapping[str, str], timeout_s: float, tolerance: float,
               listener: Listener) -> List[Dict[str, Any]]:
    """Verify configs one after the other, waiting for device memory between them."""
    tp = max(int(read_config(p).get("tensor_parallel_size") or 1) for p in paths)
    devices = Devices(env, tp)
    return [verify_config(path, python, env, timeout_s, tolerance, listener, devices, i)
            for i, path in enumerate(paths, start=1)]
