"""Round lengths first where a boundary carries one bit a launch (a start that hangs, a request that fails
far below its pool).

Such a boundary is not where vLLM's memory numbers point; it is a length some code path cannot take,
and those sit on round numbers: powers of two and their multiples (batched-token budgets, graph capture
sizes, kernel limits, rope lengths) or round decimals (lengths people configure). So each blind probe is
the roundest candidate in the middle half of the open range (a bisection when nothing there is rounder),
and once a round length served and a probe above it failed, the candidate just above it is tried: if the
boundary sits on that round number, that launch proves it where a bisection would pay one per halving
down to the granularity (waiting for the failure above costs one launch when it does, and spares the
edge probe whenever the probe above serves).
"""

from __future__ import annotations

import math
from typing import Iterator, Optional

DECIMAL_ZERO_BITS = 3
"""A trailing decimal zero counts as this many bits of roundness (8192: 13; 6000: 9; 20480: 12)."""
EDGE_ROUNDNESS = 9
"""A served length at least this round (a multiple of 512 or of 1000) gets the edge probe above it."""
MAX_EDGE_PROBES = 2
"""At most this many edge probes a search: where the boundary is not round, each costs one launch."""
EDGE_MIN_CANDIDATES = 8
"""Only where at least this many candidates lie above the served length: a right guess then saves a
bisection of three launches or more, a wrong one costs one."""


def roundness(length: int) -> int:
    """Trailing zero bits, or DECIMAL_ZERO_BITS per trailing decimal zero, whichever is more."""
    if length <= 0:
        return 0
    bits = (length & -length).bit_length() - 1
    decimal, rest = 0, length
    while rest % 10 == 0:
        rest //= 10
        decimal += 1
    return int(max(bits, DECIMAL_ZERO_BITS * decimal))


def _multiples_near(step: int, low: int, high: int, middle: float) -> Iterator[int]:
    """The multiples of `step` in [low, high] nearest `middle` (at most two)."""
    below = int(middle) // step * step
    for value in (below, below + step):
        if low <= value <= high:
            yield value


def roundest(low: int, high: int, granularity: int) -> Optional[int]:
    """The roundest multiple of `granularity` in [low, high] (ties: the one nearest the middle), or None."""
    first = -(-low // granularity) * granularity
    if first > high:
        return None
    middle = (low + high) / 2.0
    candidates = set(_multiples_near(granularity, first, high, middle))
    for base in (2, 10):
        step = base
        while step <= high:
            candidates.update(_multiples_near(step * granularity // math.gcd(step, granularity), first, high,
                                              middle))
            step *= base
    return max(candidates, key=lambda value: (roundness(value), -abs(value - middle)))


def round_probe(known_ok: Optional[int], top: int, lowest: int, granularity: int) -> int:
    """The next blind probe between the longest length that served (or below the lowest candidate) and
    the highest candidate not ruled out: the roundest in the middle half of that range."""
    low = known_ok + granularity if known_ok is not None and known_ok >= lowest else lowest
    span = top - low
    middle_low, middle_high = low + span // 4, top - span // 4
    probe = roundest(middle_low, middle_high, granularity)
    if probe is None:
        probe = (low // granularity + top // granularity + 1) // 2 * granularity
    return max(low, min(top, probe))


def edge_probe(served: int, top: int, granularity: int, probes_so_far: int) -> Optional[int]:
    """The candidate just above a round length that served, when no candidate up to `top` is as round
    (so the boundary sitting on it is the likeliest single guess); None when not worth a launch."""
    above = served + granularity
    if probes_so_far >= MAX_EDGE_PROBES or (top - served) // granularity < EDGE_MIN_CANDIDATES \
            or roundness(served) < EDGE_ROUNDNESS:
        return None
    rival = roundest(above, top, granularity)
    if rival is not None and roundness(rival) >= roundness(served):
        return None
    return above
