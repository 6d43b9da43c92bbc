"""Starts that never finish: how long the next trial may take, and what a boundary that rests on hangs says.

Before any start has been measured a trial gets the user's whole --trial-timeout. After one has, a
hang need not cost that much: the next trial's start must finish within a multiple of the slowest
start measured, and its request within a multiple of the slowest request (scaled to the new length),
each never below a tenth of the user's timeout and never above it. A length that hangs twice counts
as not starting; the report and the YAML say so, with the times, since a hang may also be a slow
machine.
"""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

from ..outcome import Outcome
from .record import TrialRecord

TIMEOUT_FACTOR = 3.0
"""The next trial may take this many times the slowest measured start (and request)."""
TIMEOUT_FLOOR = 0.1
"""...but never less than this fraction of the user's --trial-timeout."""
CONFIRMING_HANGS = 2
"""A length counts as not starting once it has hung this many times."""


def _request_seconds(record: TrialRecord) -> float:
    seconds = (record.request or {}).get("seconds")
    return float(seconds) if isinstance(seconds, (int, float)) and seconds >= 0 else 0.0


def derived_deadlines(records: Sequence[TrialRecord], ceiling_s: float, request_ceiling_s: Optional[float],
                      length: Optional[int]) -> Tuple[Optional[float], Optional[float]]:
    """(start deadline, request deadline) for a trial of `length`, or None for either where nothing was
    measured yet (the user's timeouts apply). Start: TIMEOUT_FACTOR x the slowest start served so far.
    Request: TIMEOUT_FACTOR x the slowest request grown in proportion to the length (a short request's
    time is mostly fixed cost, so this overestimates). Each within [TIMEOUT_FLOOR x ceiling, ceiling]."""
    served = [r for r in records if r.outcome is Outcome.OK and r.length and r.duration_s > 0]
    if not served:
        return None, None
    request_ceiling = request_ceiling_s or ceiling_s
    start = max(max(r.duration_s - _request_seconds(r), 0.0) for r in served)
    request = max(_request_seconds(r) * max(1.0, (length or 0) / (r.length or 1)) for r in served)
    return _within(TIMEOUT_FACTOR * start, ceiling_s), _within(TIMEOUT_FACTOR * request, request_ceiling)


def _within(seconds: float, ceiling_s: float) -> float:
    return round(min(ceiling_s, max(TIMEOUT_FLOOR * ceiling_s, seconds)), 1)


def hung(records: Sequence[TrialRecord]) -> List[TrialRecord]:
    """The trials whose start did not finish within their timeout."""
    return [r for r in records if r.outcome is Outcome.TIMEOUT and r.length is not None]


def boundary_hangs(records: Sequence[TrialRecord]) -> List[TrialRecord]:
    """The hangs of the shortest length that hung (where a boundary resting on hangs lies)."""
    hangs = hung(records)
    if not hangs:
        return []
    shortest = min(r.length or 0 for r in hangs)
    return [r for r in hangs if r.length == shortest]


def confirmed(records: Sequence[TrialRecord]) -> bool:
    """The shortest length that hung has hung CONFIRMING_HANGS times."""
    return len(boundary_hangs(records)) >= CONFIRMING_HANGS


def boundary_text(records: Sequence[TrialRecord]) -> Optional[str]:
    """'max_model_len=X hung twice (...)' for a confirmed hang boundary, else None."""
    hangs = boundary_hangs(records)
    if len(hangs) < CONFIRMING_HANGS:
        return None
    times = " and ".join("trial %d after %s s" % (r.index, _seconds(r.timeout_s or r.duration_s)) for r in hangs)
    return ("the boundary is a hang: max_model_len=%d never finished starting, %d times (%s); counted as not"
            " starting" % (hangs[0].length or 0, len(hangs), times))


def _seconds(value: float) -> str:
    return ("%.1f" % value).rstrip("0").rstrip(".")


__all__ = ["CONFIRMING_HANGS", "boundary_hangs", "boundary_text", "confirmed", "derived_deadlines", "hung"]
