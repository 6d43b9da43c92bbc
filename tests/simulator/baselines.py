"""The procedures people run by hand, played against the fakegpu's memory model (TEST DOUBLE).

Each launch is one `_fakeworld.start()` plus one full-length request, counted as one launch; the
answer is whatever the procedure would write down. They measure vllm-fit, they are not the product.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Tuple

from .harness import _fakeworld, _world, truth
from .worlds import Case

Fit = Optional[Tuple[int, Optional[float]]]
"""(max_model_len, gpu_memory_utilization) or None."""


class Launcher:
    """Counts launches of one world; `starts` and `serves` as a person would see them."""

    def __init__(self, case: Case):
        self.world, self.case, self.launches = _world(case), case, 0
        self.tp = case.question.get("tensor_parallel_size", 1)

    def run(self, length: int, **knob: Any) -> Tuple[bool, bool]:
        """(started, served a full-length request)."""
        self.launches += 1
        started = _fakeworld.start(self.world, max_model_len=length, tensor_parallel_size=self.tp, **knob)
        if started["fail"]:
            return False, False
        served = _fakeworld.request(self.world, started, length - 1, 1)["kind"] == "ok"
        return True, served


def _knob(case: Case, utilization: Optional[float]) -> Dict[str, Any]:
    if case.question.get("kv_cache_memory") is not None:
        return {"kv_cache_memory_bytes": case.question["kv_cache_memory"]}
    fixed = case.question.get("gpu_memory_utilization")
    return {"gpu_memory_utilization": fixed if fixed is not None else utilization}


def walk_down(case: Case) -> Tuple[Fit, int]:
    """vLLM's tuning advice: from 0.98 down in 0.01 steps until it starts, at a length given to it
    (the true answer's, or the target): it measures the utilization search alone."""
    launcher = Launcher(case)
    known = (truth(case).get("fit") or {}).get("max_model_len")
    length = case.question.get("target_len") or known or case.question["max_len"]
    for step in range(98):
        utilization = round(0.98 - 0.01 * step, 2)
        started, _ = launcher.run(length, **_knob(case, utilization))
        if started:
            return (length, utilization), launcher.launches
    return None, launcher.launches


def doubling(case: Case) -> Tuple[Fit, int]:
    """The doubling loop at vLLM's default utilization (0.9): 4096, 8192 ... while it starts and serves."""
    launcher = Launcher(case)
    knob = _knob(case, 0.9)
    best, length = None, 4096
    while length <= case.question["max_len"]:
        _, served = launcher.run(length, **knob)
        if not served:
            break
        best, length = length, length * 2
    return ((best, knob.get("gpu_memory_utilization")) if best else None), launcher.launches


def _bisect(low: int, high: int, works: Callable[[int], bool]) -> Optional[int]:
    """The largest x in [low, high] with works(x), for a monotone works; None when none does."""
    best = None
    while low <= high:
        middle = (low + high) // 2
        if works(middle):
            best, low = middle, middle + 1
        else:
            high = middle - 1
    return best


def _gallop_down(top: int, works: Callable[[int], bool]) -> Optional[int]:
    """The largest x <= top with works(x), where works holds on an interval below the limit: try top,
    then top - 1, top - 3, top - 7 ... until one works, then bisect between it and the last failure."""
    failed, step = top + 1, 1
    x = top
    while x >= 1:
        if works(x):
            return _bisect(x + 1, failed - 1, works) or x
        failed, x, step = x, top - (2 * step - 1), step * 2
    return None


def blind_bisection(case: Case) -> Tuple[Fit, int]:
    """Bisection over both knobs, reading nothing but started-and-served: utilization, then length."""
    launcher = Launcher(case)
    q = case.question
    g = q["granularity"]
    lowest = -(-q["min_len"] // g)
    if q.get("target_len"):
        n = q["target_len"]
        hundredths = _bisect(1, round((q.get("max_utilization") or 0.95) * 100),
                             lambda u: not launcher.run(n, gpu_memory_utilization=u / 100)[1])
        least = (hundredths or 0) + 1
        return ((n, least / 100) if least <= 95 else None), launcher.launches
    if q.get("gpu_memory_utilization") is not None or q.get("kv_cache_memory") is not None:
        utilization = q.get("gpu_memory_utilization")
    else:
        cap = round((q.get("max_utilization") or 0.95) * 100)
        found = _gallop_down(cap, lambda u: launcher.run(lowest * g, gpu_memory_utilization=u / 100)[1])
        if found is None:
            return None, launcher.launches
        utilization = found / 100
    knob = _knob(case, utilization)
    k = _bisect(lowest, q["max_len"] // g, lambda k: launcher.run(k * g, **knob)[1])
    return ((k * g, knob.get("gpu_memory_utilization")) if k else None), launcher.launches


BASELINES = {"walk-down from 0.98": walk_down, "doubling at 0.9": doubling, "blind bisection": blind_bisection}
