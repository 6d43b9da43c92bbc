"""Objectives over the memory knob: the least memory for a length, and the walk-down baseline.

Pure like the length strategies. They model KV capacity as a line in the knob (one launch gives a
point; the slope is the device's total memory for utilization, 1 for KV bytes), jump to the value
the line predicts, verify it with a real trial, and bisect the knob's grid only when a prediction
misses or a number is missing.
"""

from __future__ import annotations

from typing import Dict, Optional, Sequence, Set

from ..outcome import Outcome
from .base import Candidate, Observation, profile_does_not_fit, weights_do_not_fit
from .knob import Grid, KvModel, squeezed_between, too_high
from .objectives import Objective, last_ok_index

TOO_LOW = frozenset({Outcome.KV_TOO_SMALL, Outcome.NO_KV_MEMORY})


def _status(history: Sequence[Observation], grid: Grid) -> Dict[int, Set[str]]:
    """Per knob index: which verdicts were seen there ("ok", "low", "high")."""
    seen: Dict[int, Set[str]] = {}
    for obs in history:
        if obs.memory is not None:
            verdict = "ok" if obs.outcome is Outcome.OK else "high" if too_high(obs) else \
                "low" if obs.outcome in TOO_LOW or obs.outcome is Outcome.REQUEST_FAILED else "other"
            seen.setdefault(grid.index(obs.memory), set()).add(verdict)
    return seen


class LeastMemoryForLength(Objective):
    """The least utilization (0.01 steps) or KV size (granules) that starts and serves `length` tokens."""

    informative = frozenset({Outcome.FREE_MEMORY_SHORT})

    def __init__(self, grid: Grid, length: int, model: KvModel):
        self.grid, self.length, self.model = grid, length, model

    def _predicted_index(self, history: Sequence[Observation]) -> Optional[int]:
        need = self.model.need_bytes(self.length, history)
        if need is None:
            return None
        if self.grid.kind == "kv_cache_memory_bytes":
            return self.grid.up(need)
        total = self.model.total(history)
        points = [obs for obs in history if obs.memory is not None and self.model.kv_range(obs, history)]
        if not points or not total:
            return None
        last = points[-1]
        low, _ = self.model.kv_range(last, history) or (0, 0)  # pessimistic: the first guess should serve
        return self.grid.up(last.memory + (need - low) / total)

    def _lowest_possible(self, history: Sequence[Observation]) -> Optional[int]:
        """The lowest index the line allows at its most optimistic (None when it cannot say).

        A trial's KV bytes are known to within one block (or the 2-decimal GiB of the log), so each start
        bounds the line's constant (its pool less its level's share of the device); below the optimistic end
        nothing can hold one sequence. Where the starts agree, together they narrow it; where they do not, a
        pool fell below the line (vLLM 0.34's extensible cache takes only what is free when another process
        holds more than the level leaves; a pool never rises above it) and the most optimistic decides. For
        the same reason a lone start at the top of 0.34's extensible range bounds nothing.
        """
        need = self.model.need_bytes(self.length, history)
        if need is None or not self.model.need_exact(self.length, history) or not any(
                obs.block_size for obs in history):
            return None  # before a launch reports the block size (or with a window on V1), a guess
        if self.grid.kind == "kv_cache_memory_bytes":
            return self.grid.up(need) if self.model.config_page_holds(history) or not self.model.plain else None
        total = self.model.total(history)
        if not total:
            return None
        ranges = [(obs.memory, self.model.kv_range(obs, history)) for obs in history  # any start measured its
                  if obs.memory is not None and (obs.started or obs.outcome is Outcome.KV_TOO_SMALL)]  # pool
        constants = [(kv[0] - memory * total, kv[1] - memory * total) for memory, kv in ranges if kv]
        if not constants or (len(constants) == 1 and self.model.regime.extensible_kv
                             and self.grid.index(ranges[0][0]) >= self.grid.highest):
            return None
        agree = max(low for low, _ in constants) <= min(high for _, high in constants)
        highest = min(high for _, high in constants) if agree else max(high for _, high in constants)
        return self.grid.up((need - highest) / total)

    def propose(self, history: Sequence[Observation]) -> Optional[Candidate]:
        grid, seen = self.grid, _status(history, self.grid)
        if weights_do_not_fit(history) or profile_does_not_fit(history, self.length):
            return None
        caps = [grid.down(obs.free_fraction) for obs in history if obs.free_fraction is not None]
        top = min([grid.highest, *caps])
        ok = [i for i, s in seen.items() if "ok" in s]
        low_bad = max([i for i, s in seen.items() if "low" in s and "ok" not in s], default=grid.lowest - 1)
        high_bad = min([i for i, s in seen.items() if "high" in s and "ok" not in s], default=top + 1)
        top = min(top, high_bad - 1)
        possible = self._lowest_possible(history)
        if possible is not None:
            low_bad = max(low_bad, possible - 1)
        best = min(ok) if ok else None
        if best is not None and best - 1 <= low_bad:
            return None
        upper = best if best is not None else top + 1
        if upper - 1 <= low_bad:
            return None  # nothing left to try: every candidate is too low or too high
        predicted = self._predicted_index(history)
        if predicted is not None and low_bad < predicted < upper and predicted not in seen:
            return grid.candidate(predicted, self.length)
        if best is None:
            if top not in seen and top > low_bad:
                return grid.candidate(top, self.length)  # measure once at the top (or the cap found) to predict from
            if grid.kind == "kv_cache_memory_bytes":  # a KV size is usually small beside the free memory
                nxt = min(top, max(low_bad + 1, 2 * low_bad))  # no prediction, or it missed low: gallop up
            else:  # a utilization is usually high (the weights take most of the device): bisect
                nxt = (low_bad + top + 1) // 2
            return grid.candidate(nxt, self.length) if nxt not in seen and nxt > low_bad else None
        middle = (low_bad + upper) // 2
        if possible is None and not any("low" in s for s in seen.values()):
            # nothing bounds it from below (a window on V1: the need is not known exactly): the step below
            # the least that served first (its failure is the proof), then steps that double
            middle = max(middle, best - (1 << min(len(ok) - 1, 40)))
        if middle <= low_bad or middle in seen:
            return None
        return grid.candidate(middle, self.length)

    def why_nothing_fits(self, history: Sequence[Observation]) -> Optional[str]:
        return super().why_nothing_fits(history) or squeezed_between(
            self.grid, history, self._lowest_possible(history), "%d tokens" % self.length)

    def fit(self, history: Sequence[Observation]) -> Optional[int]:
        ok = [obs.memory for obs in history if obs.outcome is Outcome.OK and obs.memory is not None]
        if not ok:
            return None
        least = min(ok)
        return last_ok_index(history, lambda obs: obs.memory == least)


class WalkDown(Objective):
    """Baseline (vLLM's tuning script): utilization from 0.98 down in 0.01 steps until vLLM starts.

    "Starts" is all it checks: a start whose full-length request then runs out of memory ends the
    walk too, and that utilization is its answer. Kept to measure the other objectives against.
    """

    informative = frozenset({Outcome.FREE_MEMORY_SHORT})
    START = 0.98

    def __init__(self, length: int, floor: float = 0.01):
        self.length, self.floor = length, floor

    @staticmethod
    def _started(obs: Observation) -> bool:
        return obs.started or (obs.outcome is Outcome.OOM and obs.kv_bytes is not None)  # after KV sizing

    def propose(self, history: Sequence[Observation]) -> Optional[Candidate]:
        if any(self._started(obs) for obs in history):
            return None
        util = round(self.START - 0.01 * len(history), 2)
        return None if util < self.floor else Candidate(self.length, gpu_memory_utilization=util)

    def fit(self, history: Sequence[Observation]) -> Optional[int]:
        return next((i for i, obs in enumerate(history) if self._started(obs)), None)
