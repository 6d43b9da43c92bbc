"""What every search strategy shares: the length space, observations, and the length verdicts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, List, Optional, Sequence

from ..outcome import Outcome

AUTO = -1
"""A requested max_model_len of -1 asks vLLM (0.14+) to fit the length to memory itself."""

LENGTH_FAILURES = frozenset({Outcome.KV_TOO_SMALL, Outcome.TOO_LONG_FOR_MODEL, Outcome.OOM,
                             Outcome.REQUEST_FAILED})
"""Outcomes that prove a length does not work (and, lengths failing monotonically, no longer one)."""


@dataclass(frozen=True)
class Observation:
    """One finished trial as the search sees it.

    `length` is the max_model_len the engine actually ran with (for AUTO, the one vLLM chose; None
    when it never said). `hint` is the longest max_model_len that the KV pool measured by this trial
    holds, from vLLM's own numbers (its estimate, its capacity line, its block count), or None.
    """

    requested: int
    length: Optional[int]
    outcome: Outcome
    hint: Optional[int] = None
    derived_max: Optional[int] = None
    memory: Optional[float] = None
    """The memory knob's value for this trial (utilization or KV bytes), for 2-knob searches."""
    blocks: Optional[int] = None
    block_size: Optional[int] = None
    kv_bytes: Optional[float] = None
    """KV cache memory as vLLM logged it (2-decimal GiB on GPUs), when it did."""
    total_bytes: Optional[float] = None
    """Device (or NUMA node) memory as vLLM logged it, when it did."""
    oom_shortfall_bytes: Optional[float] = None
    """From an out-of-memory error: how much more the failed allocation needed than was free."""
    free_fraction: Optional[float] = None
    """From a free-memory error: free / total device memory at start-up."""


@dataclass(frozen=True)
class LengthSpace:
    """The candidate lengths: multiples of `granularity` in [min_len, max_len]."""

    min_len: int
    max_len: int
    granularity: int

    @property
    def lowest(self) -> int:
        return -(-self.min_len // self.granularity) * self.granularity

    @property
    def highest(self) -> int:
        return self.max_len // self.granularity * self.granularity

    def floor(self, length: int) -> int:
        """The largest multiple of the granularity at or below `length`."""
        return length // self.granularity * self.granularity

    def contains(self, length: Optional[int]) -> bool:
        return length is not None and self.lowest <= length <= self.highest and length % self.granularity == 0


@dataclass(frozen=True)
class Bracket:
    """What the observations so far prove about lengths, assuming a shorter length never needs more.

    Every length at or below `proven_ok` works; every length at or above `proven_fail` does not;
    nothing above `ceiling` can work (the model's maximum, or a KV pool measured by a trial).
    """

    proven_ok: Optional[int]
    proven_fail: Optional[int]
    ceiling: Optional[int]
    verified: frozenset
    tried: frozenset
    no_memory: bool


def bracket(history: Iterable[Observation], use_hints: bool = True) -> Bracket:
    """Fold the observations into a Bracket. Hints bound the ceiling only when use_hints is set."""
    proven_ok = proven_fail = ceiling = None
    verified, tried, no_memory = set(), set(), False
    for obs in history:
        if obs.length is not None:
            tried.add(obs.length)
        if obs.requested != AUTO:
            tried.add(obs.requested)
        if obs.outcome is Outcome.NO_KV_MEMORY:
            no_memory = True
        if obs.derived_max is not None:
            ceiling = _min(ceiling, obs.derived_max)
        if obs.length is None:
            continue
        if obs.outcome is Outcome.OK:
            proven_ok = max(proven_ok or 0, obs.length)
            verified.add(obs.length)
            if use_hints and obs.hint is not None:
                ceiling = _min(ceiling, max(obs.hint, obs.length))
        elif obs.outcome in LENGTH_FAILURES:
            proven_fail = _min(proven_fail, obs.length)
    return Bracket(proven_ok, proven_fail, ceiling, frozenset(verified), frozenset(tried), no_memory)


def _min(current: Optional[int], value: int) -> int:
    return value if current is None else min(current, value)


def top_candidate(space: LengthSpace, state: Bracket) -> Optional[int]:
    """The highest candidate not ruled out, or None when nothing in the space can work."""
    if state.no_memory:
        return None
    limit = space.highest
    if state.proven_fail is not None:
        limit = min(limit, state.proven_fail - 1)
    if state.ceiling is not None:
        limit = min(limit, state.ceiling)
    top = space.floor(limit)
    return top if top >= space.lowest else None


def best_verified(space: LengthSpace, history: Sequence[Observation]) -> Optional[int]:
    """The longest candidate length that a trial verified (started and served), or None."""
    lengths: List[int] = [obs.length for obs in history
                          if obs.outcome is Outcome.OK and space.contains(obs.length)]
    return max(lengths) if lengths else None


@dataclass(frozen=True)
class Candidate:
    """One configuration to launch: a length (or AUTO) and at most one memory knob."""

    max_model_len: int
    gpu_memory_utilization: Optional[float] = None
    kv_cache_memory_bytes: Optional[int] = None

    def engine_args(self) -> dict:
        """The LLM keyword arguments this candidate sets."""
        args = {"max_model_len": self.max_model_len}
        if self.gpu_memory_utilization is not None:
            args["gpu_memory_utilization"] = self.gpu_memory_utilization
        if self.kv_cache_memory_bytes is not None:
            args["kv_cache_memory_bytes"] = self.kv_cache_memory_bytes
        return args
