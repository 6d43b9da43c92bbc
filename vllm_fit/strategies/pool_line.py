"""Pools that shrink with the length: where the line through two measured pools meets the need.

Where the profiling run grows with max_model_len (V0 without chunked prefill profiles
max_model_len tokens; some models' profiles depend on it on V1 too), each longer length gets a
smaller KV pool. The pool's reach is then a line in the length: two trials give two points
(the length a pool was sized at, the longest length it holds), and the answer is where the line
crosses "holds its own length". Jumping there (a secant step) replaces the bisection between a
pool that held its length and one that did not; the launch verifies it, and a miss adds a point.
"""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

from ..outcome import Outcome
from .base import LengthSpace, Observation

Point = Tuple[int, int]
"""(max_model_len the pool was sized at, the longest max_model_len that pool holds)."""


def pool_points(history: Sequence[Observation]) -> List[Point]:
    """One point per trial that sized its pool and said how far it reaches (a start, or a too-long start
    with vLLM's capacity or estimate); a start with no memory at all for the cache reaches nothing. A pool
    that kv_cache_memory_bytes (or the CPU backend's VLLM_CPU_KVCACHE_SPACE before 0.20) sized is no point:
    it is the same at every length, and where two hints of it differ, one is a pessimistic reading of
    rounded numbers, not a pool that shrank."""
    points = []
    for obs in history:
        if obs.length is None or obs.kv_fixed:
            continue
        at = max(obs.pool_at or 0, obs.length)
        if obs.hint is not None and (obs.started or obs.outcome is Outcome.KV_TOO_SMALL):
            points.append((at, obs.hint))
        elif obs.outcome is Outcome.NO_KV_MEMORY:
            points.append((at, 0))
    return points


def secant_length(space: LengthSpace, history: Sequence[Observation]) -> Optional[int]:
    """The candidate where the pools' line holds its own length, between the longest length whose pool
    held it and the shortest whose pool did not; None unless the pools measured shrink with the length.

    A pool with no memory at all is a point below the line (its budget was negative, not zero): it is
    used only where no too-small pool gives a better one.
    """
    block = next((obs.block_size for obs in reversed(history) if obs.block_size), 0)
    return secant_of_points(space, pool_points(history), block=block)


def secant_of_points(space: LengthSpace, points: Sequence[Point], above_held: bool = True,
                     block: int = 0) -> Optional[int]:
    """secant_length over given points (pools of one memory level, or shifted to it). `above_held`: at
    least one granule above the longest length that held (a length measured here); a level not yet
    launched measured none of them, so the crossing itself is its candidate.

    No longer length reaches further than the longest that held (its pool only shrinks), and each reach is
    rounded down to whole blocks of `block` tokens: the held pool's own reach may be up to a block further.
    Where the line drops less than half a block from the held length to that reach, the reach itself is
    likelier to hold than not, and its own pool proves it the longest: it is the candidate."""
    held = [p for p in points if p[1] >= p[0]]
    short = [p for p in points if p[1] < p[0] and p[1] > 0] or [p for p in points if p[1] < p[0]]
    if not held or not short:
        return None
    (x1, y1), (x2, y2) = max(held), min(short)
    if x2 <= x1 or y2 >= y1:  # not a shrinking pool (or the points disagree): the plain hints decide
        return None
    slope = (y2 - y1) / (x2 - x1)
    crossing = (y1 - slope * x1) / (1 - slope)  # y(x) = x; y(x1) >= x1 and y(x2) < x2, so x1 <= crossing < x2
    candidate = max(space.floor(int(crossing)), space.floor(x1) + space.granularity if above_held else space.lowest)
    reach = space.floor(y1)
    if above_held and candidate < reach < x2 and -slope * (reach - x1) < block / 2:
        candidate = reach
    return candidate if candidate < x2 and candidate <= space.highest else None


def points_at_memory(history: Sequence[Observation], memory: float, total: float, per_token: float) -> List[Point]:
    """Every trial's points moved to the utilization `memory`: a level more adds utilization x total bytes
    to any length's pool."""
    return [(at, holds + int((memory - obs.memory) * total / per_token))
            for obs in history if obs.memory is not None for at, holds in pool_points([obs])]


def shrinks(points: Sequence[Point], tolerance: int) -> bool:
    """Of two points (at one memory level), the longer length reaches less by more than `tolerance` tokens."""
    ordered = sorted(points)
    return any(later[1] < earlier[1] - tolerance for earlier, later in zip(ordered, ordered[1:])
               if later[0] > earlier[0])


__all__ = ["Point", "points_at_memory", "pool_points", "secant_length", "secant_of_points", "shrinks"]
