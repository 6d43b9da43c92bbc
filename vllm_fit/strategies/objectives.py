"""Objectives: what is being optimised, as a proposer of whole candidates (length plus memory knob).

An objective is pure like a strategy: it sees the observations so far and returns the next
candidate, or None when it is done; `fit` picks the winning observation.
"""

from __future__ import annotations

from typing import Any, Callable, FrozenSet, Optional, Sequence

from ..outcome import OomStage, Outcome
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
    """The longest verified max_model_len with the memory knob held fixed (or left to vLLM).

    At a fixed knob, too little free memory (vLLM's start-up check) and an out-of-memory error
    allocating the KV cache do not depend on the length: each proves nothing fits at this setting.
    """

    informative = frozenset({Outcome.FREE_MEMORY_SHORT})

    def __init__(self, strategy: LengthStrategy, utilization: Optional[float] = None,
                 kv_cache_memory_bytes: Optional[int] = None):
        self.strategy = strategy
        self.utilization = utilization
        self.kv_cache_memory_bytes = kv_cache_memory_bytes

    def propose(self, history: Sequence[Observation]) -> Optional[Candidate]:
        if weights_do_not_fit(history) or _kv_cache_does_not_fit(history) or _free_memory_short(history):
            return None
        length = self.strategy.propose(history)
        if length is None:
            return None
        return Candidate(length, self.utilization, self.kv_cache_memory_bytes)

    def fit(self, history: Sequence[Observation]) -> Optional[int]:
        best = self.strategy.best(history)
        return last_ok_index(history, lambda obs: obs.length == best) if best is not None else None

    def why_nothing_fits(self, history: Sequence[Observation]) -> Optional[str]:
        short = _free_memory_short(history)
        if short is not None:
            free = " (%.0f%% of the device is free)" % (100 * short.free_fraction) if short.free_fraction else ""
            return ("vLLM refuses to start: the device has less free memory than total x gpu_memory_utilization%s;"
                    " other processes hold the rest. Free the device or lower gpu_memory_utilization (vLLM checks"
                    " it even when kv_cache_memory_bytes sizes the cache)" % free)
        shortest = self.strategy.space.lowest
        if any(obs.outcome is Outcome.OOM and obs.oom_stage is OomStage.REQUEST and obs.length == shortest
               for obs in history):
            return ("the full-length request runs out of memory even at the shortest length (%d): the memory"
                    " setting leaves too little headroom beside the KV cache; lower it" % shortest)
        failed = _kv_cache_does_not_fit(history)
        if failed is not None and not weights_do_not_fit(history):
            return ("the KV cache this memory setting sizes does not fit on the device beside the weights and the"
                    " activations (out of memory allocating it at max_model_len=%s); a shorter length allocates"
                    " no less: lower the memory setting" % failed.length)
        return super().why_nothing_fits(history)


def _free_memory_short(history: Sequence[Observation]) -> Optional[Observation]:
    """vLLM's free-memory check failed (after the retries that wait for memory to come back)."""
    return next((obs for obs in history if obs.outcome is Outcome.FREE_MEMORY_SHORT and not obs.transient), None)


def _kv_cache_does_not_fit(history: Sequence[Observation]) -> Optional[Observation]:
    """With the knob fixed, an out-of-memory error allocating the KV cache (or capturing graphs after
    it): a shorter max_model_len sizes the same pool or a larger one, so no length can start."""
    return next((obs for obs in history if obs.outcome is Outcome.OOM and obs.oom_stage is OomStage.KV_ALLOCATION),
                None)


def last_ok_index(history: Sequence[Observation], predicate: Callable[[Observation], Any]) -> Optional[int]:
    """Index of the last verified observation that satisfies predicate."""
    for index in range(len(history) - 1, -1, -1):
        if history[index].outcome is Outcome.OK and predicate(history[index]):
            return index
    return None
