"""Strategies for max_model_len at a fixed memory knob. Pure: observations in, next length out.

`predict` jumps to what vLLM printed and verifies it; `bisect` and `doubling` are the baselines it
is measured against. Each `propose` returns the next requested max_model_len (AUTO for vLLM's own
fit), or None when the search is over; `best` returns the answer among the verified lengths.
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Sequence

from ..outcome import OomStage, Outcome
from .base import AUTO, LengthSpace, Observation, best_verified, bracket, top_candidate
from .pool_line import secant_length
from .round_lengths import round_probe

MAX_HINT_MISSES = 2
"""After this many hinted candidates failed, predict stops trusting hints and bisects."""


class LengthStrategy:
    """Base: a named strategy over one LengthSpace."""

    name = "base"

    def __init__(self, space: LengthSpace):
        self.space = space

    def propose(self, history: Sequence[Observation]) -> Optional[int]:
        raise NotImplementedError

    def best(self, history: Sequence[Observation]) -> Optional[int]:
        """The fit: the longest verified candidate."""
        return best_verified(self.space, history)


def _bisect_step(space: LengthSpace, known_ok: Optional[int], top: int) -> int:
    """The midpoint candidate between the longest known-good length and the top candidate."""
    g = space.granularity
    low_k = (space.floor(known_ok) // g) if known_ok is not None and known_ok >= space.lowest \
        else space.lowest // g - 1
    high_k = top // g
    return (low_k + high_k + 1) // 2 * g


def _gallop_step(space: LengthSpace, history: Sequence[Observation], known_ok: int, top: int) -> int:
    """Above a verified length whose pool says nothing about longer ones (a window on V1 whose groups
    are not pinned down): the next candidate up, then steps that double with each success (1, 2, 4 ...
    granules), never beyond the midpoint to the lowest length ruled out. Where pools do speak but a
    length-dependent profile made them wrong, the search bisects instead.

    A verified fit is usually near the answer (vLLM's numbers pointed at it); a bisection from the
    model's maximum would pay a launch per halving of a range the answer is seldom in."""
    verified_above = len({obs.length for obs in history if obs.outcome is Outcome.OK and obs.length is not None})
    step = space.granularity * (1 << min(max(verified_above - 1, 0), 40))
    return min(space.floor(known_ok) + step, _bisect_step(space, known_ok, top))


class Predict(LengthStrategy):
    """Jump to the length vLLM's numbers point at, verify it, bisect only when numbers are missing.

    First trial: vLLM's own auto-fit when `use_autofit` (vLLM 0.14+ and the upper bound is the
    model's own maximum), else the upper bound. Then: the estimate from a too-long error, or the
    length the measured KV pool of a successful start holds; a success whose pool holds no further
    candidate ends the search (a shorter length never gets a smaller pool).

    Auto-fit sized its pool with the model's full length configured; a shorter max_model_len may
    profile smaller and so get a larger pool (V1 profiles max_num_batched_tokens, but not every
    model does). Auto-fit's length is therefore proven the longest only by launching the next
    candidate above it: one more launch, and a wrong answer never goes unnoticed.
    """

    name = "predict"

    def __init__(self, space: LengthSpace, use_autofit: bool = False, first: Optional[int] = None):
        super().__init__(space)
        self.use_autofit = use_autofit
        self.first = first
        """A length predicted before any launch (a fixed KV size in known pages): launched first."""

    def propose(self, history: Sequence[Observation]) -> Optional[int]:
        if not history:
            if self.first is not None:
                return self.first
            return AUTO if self.use_autofit else self.space.highest
        state = bracket(history, lowest=self.space.lowest)
        if any(obs.requested == AUTO and obs.length is None and obs.fails_length for obs in history):
            # auto-fit configures the model's full length first: failing before it said more rules that out
            state = dataclasses.replace(state, failures=state.failures | {self.space.highest})
        top = top_candidate(self.space, state)
        if top is None:
            return None
        best = best_verified(self.space, history)
        if best is not None and best >= top:
            return None
        above = self._above_autofit(history, best, state.tried) if best is not None else None
        if above is not None:
            return above
        last = history[-1]
        if (last.outcome in (Outcome.NO_KV_MEMORY, Outcome.TIMEOUT) or last.fails_everywhere or (
                last.outcome is Outcome.OOM and last.oom_stage in (OomStage.PROFILE, OomStage.REQUEST))) \
                and state.proven_ok is None and self.space.lowest not in state.tried:
            # the profile and the request's headroom seldom depend on the length, and a start or a request
            # that hangs may be a slow machine: the shortest says whether any length fits (and how long a
            # start and a request take, so that later hangs cost less than the whole --trial-timeout)
            return self.space.lowest
        if state.proven_ok is not None and state.proven_ok >= top:
            return top  # proven by a longer success; verify the candidate itself
        secant = secant_length(self.space, history)
        if secant is not None and secant <= top and secant not in state.tried and state.allowed(secant) \
                and (best is None or secant > best):
            return secant  # the pools shrink with the length: where their line holds its own length
        hinted = self._hinted(history, top, best)
        if hinted is not None:
            return hinted
        if _bounded_by_one_bit(history, top + self.space.granularity, self.space.highest):
            # one bit a launch: the probe that halves the prior on where it is (round lengths likeliest)
            return round_probe(state.proven_ok, top, self.space.lowest, self.space.granularity)
        unbounded = [obs for obs in history if obs.outcome is Outcome.OK and obs.length == state.proven_ok
                     and obs.hint is None]
        if state.proven_ok is not None and unbounded:  # its pool says nothing about longer lengths
            return _gallop_step(self.space, history, state.proven_ok, top)
        return _bisect_step(self.space, state.proven_ok, top)

    def _above_autofit(self, history: Sequence[Observation], best: int, tried) -> Optional[int]:
        """The candidate above an auto-fit answer, when that answer's pool was sized at a longer length
        (auto-fit reduced the length; where it kept it, its pool bounds the lengths above as any start's)."""
        nxt = best + self.space.granularity
        from_autofit = any(obs.requested == AUTO and obs.outcome is Outcome.OK and obs.length == best
                           and (obs.pool_at or 0) > best for obs in history)
        if not from_autofit or nxt > self.space.highest or nxt in tried:
            return None
        return nxt

    def _hinted(self, history: Sequence[Observation], top: int, best: Optional[int]) -> Optional[int]:
        """The candidate the last trial's numbers point at, if it is new and still possible."""
        misses = sum(1 for obs in history[1:] if obs.outcome is not Outcome.OK)
        last = history[-1]
        if last.hint is None or misses > MAX_HINT_MISSES:
            return None
        if last.fails_below_pool and (last.fails_everywhere or last.fails_with_room
                                      or sum(o.fails_below_pool for o in history) > 1):
            return None  # the pool is not the limit: one granule down at most once (at its edge), then bisect
        if last.hint >= top and _bounded_by_one_bit(history, top + self.space.granularity, self.space.highest):
            return None  # the pool reaches past a length that hung or failed with room: it says nothing about it
        candidate = max(self.space.lowest, self.space.floor(min(last.hint, top)))
        if candidate in bracket(history).tried:
            return None
        if best is not None and candidate <= best:
            return None
        return candidate


def _shortest_failure(history: Sequence[Observation], length: int, highest: int) -> Optional[Observation]:
    """The trial that ruled out the shortest length at or below `length`. An auto-fit start that failed
    before it named a length configured the model's full length (`highest`) when it failed."""
    failed = [(obs.length if obs.length is not None else highest, obs) for obs in history if obs.fails_length
              and (obs.length is not None or obs.requested == AUTO)]
    failed = [(at, obs) for at, obs in failed if at <= length]
    return min(failed, key=lambda pair: pair[0])[1] if failed else None


def _bounded_by_one_bit(history: Sequence[Observation], length: int, highest: int) -> bool:
    """The shortest length ruled out at or below `length` hung at start, or its request failed with the pool
    holding it with room to spare: that failure says nothing about where it begins."""
    shortest = _shortest_failure(history, length, highest)
    return shortest is not None and (shortest.outcome is Outcome.TIMEOUT or shortest.fails_with_room)


class Bisect(LengthStrategy):
    """Blind bisection over the candidates: only started/failed counts, numbers are ignored."""

    name = "bisect"

    def propose(self, history: Sequence[Observation]) -> Optional[int]:
        state = bracket(history, use_hints=False, lowest=self.space.lowest)
        top = top_candidate(self.space, state)
        if top is None:
            return None
        known_ok = state.proven_ok
        if known_ok is not None and self.space.floor(known_ok) >= top:
            return None
        return _bisect_step(self.space, known_ok, top)


class Doubling(LengthStrategy):
    """The common hand loop: 4096, 8192, 16384 ... while it starts; halve while it does not.

    Its candidates are powers of two, so its answer is the longest power of two that works.
    """

    name = "doubling"
    START = 4096

    def _powers(self):
        length = 1
        while length <= self.space.max_len:
            if length >= self.space.min_len:
                yield length
            length *= 2

    def propose(self, history: Sequence[Observation]) -> Optional[int]:
        powers = list(self._powers())
        if not powers:
            return None
        if not history:
            below = [p for p in powers if p <= self.START]
            return below[-1] if below else powers[0]
        last = history[-1]
        first = history[0]
        index = powers.index(last.requested) if last.requested in powers else None
        if index is None:
            return None
        if first.outcome is Outcome.OK:  # going up
            return powers[index + 1] if last.outcome is Outcome.OK and index + 1 < len(powers) else None
        return powers[index - 1] if last.outcome is not Outcome.OK and index > 0 else None

    def best(self, history: Sequence[Observation]) -> Optional[int]:
        lengths = [obs.length for obs in history if obs.outcome is Outcome.OK and obs.length is not None]
        return max(lengths) if lengths else None


STRATEGIES = {cls.name: cls for cls in (Predict, Bisect, Doubling)}
