"""Objectives: what is being optimised, as a proposer of whole candidates (length plus memory knob).

An objective is pure like a strategy: it sees the observations so far and returns the next
candidate, or None when it is done; `fit` picks the winning observation.
"""

from __future__ import annotations

from typing import Any, Callable, FrozenSet, Optional, Sequence

from ..outcome import Outcome
from .base import Candidate, Observation, weights_do_not_fit, why_nothing_fits
from .length import LengthStrategy


class Objective:
    """Base: propose candidates and pick the fit from observations."""

    informative: FrozenSet[Outcome] = frozenset()
    """Outcomes this objective learns from that would stop a search with the memory knob fixed."""

    def propose(self, history: Sequence[Observation]) -> Optional[Candidate]:
        raise NotImplementedError

    def fit(self, history: Sequence[Observation]) -> Optional[int]:
        """Index of the winning observation in history, or None when nothing fits."""
        raise NotImplementedError

    def why_nothing_fits(self, history: Sequence[Observation]) -> Optional[str]:
        """When the search ends without a fit: the reason in numbers, if the trials give one."""
        return why_nothing_fits(history)


class LongestAtFixedMemory(Objective):
    """The longest verified max_model_len with the memory knob held fixed (or left to vLLM)."""

    def __init__(self, strategy: LengthStrategy, utilization: Optional[float] = None,
                 kv_cache_memory_bytes: Optional[int] = None):
        self.strategy = strategy
        self.utilization = utilization
        self.kv_cache_memory_bytes = kv_cache_memory_bytes

    def propose(self, history: Sequence[Observation]) -> Optional[Candidate]:
        if weights_do_not_fit(history):
            return None
        length = self.strategy.propose(history)
        if length is None:
            return None
        return Candidate(length, self.utilization, self.kv_cache_memory_bytes)

    def fit(self, history: Sequence[Observation]) -> Optional[int]:
        best = self.strategy.best(history)
        return last_ok_index(history, lambda obs: obs.length == best) if best is not None else None


def last_ok_index(history: Sequence[Observation], predicate: Callable[[Observation], Any]) -> Optional[int]:
    """Index of the last verified observation that satisfies predicate."""
    for index in range(len(history) - 1, -1, -1):
        if history[index].outcome is Outcome.OK and predicate(history[index]):
            return index
    return None
