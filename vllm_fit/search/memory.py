"""Objectives over the memory knob: the highest safe utilization, or the least memory for a length.

Pure like the length strategies. They model KV capacity as a line in the knob (one launch gives a
point; the slope is the device's total memory for utilization, 1 for KV bytes), jump to the value
the line predicts, verify it with a real trial, and bisect the knob's grid only when a prediction
misses or a number is missing.
"""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence, Set

from ..outcome import Outcome
from .base import Candidate, Observation, profile_does_not_fit, weights_do_not_fit
from .knob import Grid, KvModel, too_high
from .length import LengthStrategy
from .objectives import Objective, last_ok_index

TOO_LOW = frozenset({Outcome.KV_TOO_SMALL, Outcome.NO_KV_MEMORY})
PRINTED_GIB_ERROR = 0.02 * (1 << 30)
"""vLLM and torch print memory in 2-decimal GiB: two such numbers are off by up to this much."""


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

        A trial's KV bytes are known to within one block (or the 2-decimal GiB of the log), so the
        line gives a range; below its optimistic end nothing can hold one sequence.
        """
        need = self.model.need_bytes(self.length, history)
        if need is None or not any(obs.block_size for obs in history):
            return None  # before a launch reports the block size, the need is only a guess
        if self.grid.kind == "kv_cache_memory_bytes":
            return self.grid.up(need) if self.model.bytes_per_token else None
        total = self.model.total(history)
        if not total:
            return None
        ranges = [(obs.memory, self.model.kv_range(obs, history)) for obs in history
                  if obs.memory is not None and obs.outcome is Outcome.OK]
        bounds = [self.grid.up(memory + (need - kv[1]) / total) for memory, kv in ranges if kv]
        return max(bounds) if bounds else None

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
            if not seen:
                return grid.candidate(top, self.length)  # measure once at the top to predict from
            nxt = min(top, max(low_bad + 1, 2 * low_bad))  # the prediction missed low: gallop up
            return grid.candidate(nxt, self.length) if nxt not in seen and nxt > low_bad else None
        middle = (low_bad + upper) // 2
        if middle <= low_bad or middle in seen:
            return None
        return grid.candidate(middle, self.length)

    def fit(self, history: Sequence[Observation]) -> Optional[int]:
        ok = [obs.memory for obs in history if obs.outcome is Outcome.OK and obs.memory is not None]
        if not ok:
            return None
        least = min(ok)
        return last_ok_index(history, lambda obs: obs.memory == least)


class LongestAtHighestUtilization(Objective):
    """The longest max_model_len at the highest utilization (0.01 steps, at most the cap) that serves.

    Each utilization level gets its own length search. A level where a trial ran out of memory
    (at start or on the full-length request) is too high, however long the KV cache: it is never a
    fit. An OOM's numbers (what it tried to allocate, what was free) predict the highest level that
    leaves enough headroom, so the next launch goes straight there.
    """

    informative = frozenset({Outcome.FREE_MEMORY_SHORT})

    def __init__(self, grid: Grid, make_strategy: Callable[[], LengthStrategy], model: KvModel):
        self.grid, self.strategy, self.model = grid, make_strategy(), model

    def _at(self, history: Sequence[Observation], index: int) -> List[Observation]:
        return [obs for obs in history if obs.memory is not None and self.grid.index(obs.memory) == index]

    def _works(self, history: Sequence[Observation], index: int) -> Optional[bool]:
        """True: serves at some length; False: too high, or no length fits; None: still open."""
        level = self._at(history, index)
        outcomes = {obs.outcome for obs in level}
        if any(too_high(obs) for obs in level):
            return False
        if Outcome.OK in outcomes:
            return True
        if Outcome.NO_KV_MEMORY in outcomes or (level and self.strategy.propose(level) is None):
            return False
        return None

    def _highest_safe(self, history: Sequence[Observation]) -> Optional[int]:
        """The highest level the OOM numbers allow (budget minus the shortfall), if they say.

        The numbers are printed in 2-decimal GiB; when the level above the prediction is within
        that rounding of the limit, the prediction is one level too cautious to trust: the level
        above is returned as the one to check (it is verified like every other).
        """
        total = self.model.total(history)
        limits = [obs.memory * total - obs.oom_shortfall_bytes for obs in history
                  if obs.oom_shortfall_bytes is not None and obs.memory is not None and total]
        if not limits or not total:
            return None
        limit = min(limits)
        safe = self.grid.down(limit / total)
        return safe + 1 if self.grid.value(safe + 1) * total - limit < PRINTED_GIB_ERROR else safe

    def _top(self, history: Sequence[Observation]) -> int:
        grid = self.grid
        caps = [grid.down(obs.free_fraction) for obs in history if obs.free_fraction is not None]
        high = [i for i in {grid.index(o.memory) for o in history if o.memory is not None}
                if any(too_high(o) for o in self._at(history, i))]
        return min([grid.highest, *caps] + [i - 1 for i in high])

    def _level(self, history: Sequence[Observation]) -> Optional[int]:
        """The level to work on next (None: nothing can work)."""
        grid = self.grid
        top = self._top(history)
        if weights_do_not_fit(history) or profile_does_not_fit(history, self.strategy.space.lowest):
            return None
        levels = {grid.index(o.memory) for o in history if o.memory is not None}
        high = [i for i in levels if any(too_high(o) for o in self._at(history, i))]
        failed_low = [i for i in levels if self._works(history, i) is False and i not in high]
        floor = max(failed_low, default=grid.lowest - 1)
        open_levels = [i for i in levels if self._works(history, i) is None and floor < i <= top]
        if open_levels:
            return max(open_levels)
        best = max((i for i in levels if self._works(history, i) and i <= top), default=None)
        if top <= floor:
            return best
        safe = self._highest_safe(history)
        if best is not None and best >= top:
            return best  # proven: the level above is too high, or this is the cap
        lower = best if best is not None else floor
        if safe is not None and lower < safe <= top and safe not in levels:
            return safe
        if best is not None and safe is not None and best == safe and best + 1 not in levels:
            return best + 1  # the numbers say best is the highest: prove it by the level above
        # a level above the numbers' prediction worked: they were too cautious; bisect up to the top
        if best is None and top not in levels:
            if high and safe is None:  # no numbers: gallop down from the OOM
                return min(top, max(floor + 1, min(high) - 2 ** (len(high) - 1)))
            return top
        middle = (lower + top + 1) // 2
        return middle if lower < middle and middle not in levels else best

    def propose(self, history: Sequence[Observation]) -> Optional[Candidate]:
        level = self._level(history)
        if level is None:
            return None
        at_level = self._at(history, level)
        length = self._predicted_length(history, level) if not at_level else None
        if length is None:
            length = self.strategy.propose(at_level)
        return None if length is None else self.grid.candidate(level, length)

    def _predicted_length(self, history: Sequence[Observation], level: int) -> Optional[int]:
        """The length a new level's pool holds, from a pool measured at another level (None: unknown).

        The KV budget is a constant plus utilization x total, so each measured pool bounds the
        constant; together they narrow it. The lower end keeps the guess on the side that starts;
        the launch verifies it, and its own pool corrects it.
        """
        total, page = self.model.total(history), self.model.page_bytes(history)
        sized = [(obs.memory, self.model.kv_range(obs, history)) for obs in history
                 if obs.memory is not None and obs.started and obs.blocks is not None]
        bounds = [(kv[0] - memory * total, kv[1] - memory * total) for memory, kv in sized if kv and total]
        if not total or not page or not bounds:
            return None
        low, high = max(b[0] for b in bounds), min(b[1] for b in bounds)
        if low > high:  # the pools do not line up (the profile moved): trust the latest alone
            low = bounds[-1][0]
        space = self.strategy.space
        blocks = int((low + self.grid.value(level) * total) // page)
        length = space.floor(self.model.regime.servable_len(blocks, self.model.block_size(history),
                                                            sequences=self.model.sequences))
        return length if space.lowest <= length < space.highest else None

    def fit(self, history: Sequence[Observation]) -> Optional[int]:
        working = [self.grid.index(o.memory) for o in history if o.outcome is Outcome.OK and o.memory is not None]
        level = max((i for i in working if self._works(history, i)), default=None)
        if level is None:
            return None
        best = self.strategy.best(self._at(history, level))
        if best is None:
            return None
        return last_ok_index(history, lambda o: o.memory is not None and self.grid.index(o.memory) == level
                             and o.length == best)


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
