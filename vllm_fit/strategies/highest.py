"""The default objective: the longest max_model_len at the highest utilization that serves.

Pure like the length strategies. Utilization levels (0.01 steps, at most the cap) form a bracket:
below it no length fits, above it the level runs out of memory. Each level gets its own length
search, started at the length the measured pools predict there. An out-of-memory error's numbers
point at a level; they name one allocation, not the whole shortfall, so they are a first guess to
verify, never a proof. Once they have been wrong they steer no more: the search gallops down from
the lowest level that ran out (1, 2, 4 levels) and bisects the bracket.
"""

from __future__ import annotations

from typing import Callable, List, Optional, Sequence, Tuple

from ..outcome import Outcome
from .base import (
    Candidate,
    Observation,
    best_verified,
    bracket,
    profile_does_not_fit,
    top_candidate,
    weights_do_not_fit,
)
from .knob import Grid, KvModel, oom_guesses, squeezed_between, too_high
from .length import LengthStrategy
from .objectives import Objective, last_ok_index
from .pool_line import points_at_memory, secant_of_points, shrinks


class LongestAtHighestUtilization(Objective):
    """The longest max_model_len at the highest utilization (0.01 steps, at most the cap) that serves.

    A level where a trial ran out of memory (at start or on the full-length request) is too high,
    however long the KV cache: it is never a fit. The answer is proven when the level above it is
    too high (or it is the cap) and its length is proven the longest there.
    """

    informative = frozenset({Outcome.FREE_MEMORY_SHORT})

    def __init__(self, grid: Grid, make_strategy: Callable[[], LengthStrategy], model: KvModel,
                 prior: bool = False):
        self.grid, self.strategy, self.model = grid, make_strategy(), model
        self.prior = prior
        """Start a level without a measured pool at the model's guess (not where vLLM's auto-fit starts)."""

    def _at(self, history: Sequence[Observation], index: int) -> List[Observation]:
        return [obs for obs in history if obs.memory is not None and self.grid.index(obs.memory) == index]

    def _view(self, history: Sequence[Observation], index: int) -> List[Observation]:
        """What a level's length search sees: its own trials, after the length failures that hold at
        every level (over the model's maximum, a start that hangs, a request failing far below the pool)
        seen at other levels."""
        level = self._at(history, index)
        own = {id(obs) for obs in level}
        shared = [obs for obs in history if id(obs) not in own and obs.fails_everywhere]
        return shared + level

    def _ceiling(self, history: Sequence[Observation]) -> Optional[int]:
        """The longest length not ruled out at every level (None: nothing rules one out)."""
        limits = [obs.derived_max for obs in history if obs.derived_max is not None]
        limits += [obs.length - 1 for obs in history if obs.fails_everywhere and obs.length]
        return min(limits) if limits else None

    def _works(self, history: Sequence[Observation], index: int) -> Optional[bool]:
        """True: serves at some length; False: too high, or no length fits; None: still open."""
        level = self._at(history, index)
        outcomes = {obs.outcome for obs in level}
        if any(too_high(obs) for obs in level):
            return False
        if Outcome.OK in outcomes:
            return True
        lowest = self.strategy.space.lowest
        if any(o.no_memory_at_or_below(lowest) for o in level) or (
                level and self.strategy.propose(self._view(history, index)) is None):
            return False
        return None

    def _guesses(self, history: Sequence[Observation]) -> List[Tuple[int, int]]:
        return oom_guesses(self.grid, self.model.total(history), history)

    def _numbers_wrong(self, history: Sequence[Observation], guesses: List[Tuple[int, int]]) -> bool:
        """An error's numbers were already contradicted: a level they allowed was too high, or one
        they ruled out served."""
        for level in {self.grid.index(o.memory) for o in history if o.memory is not None}:
            works = self._works(history, level)
            for failed, safe in guesses:
                if (works is False and level <= safe and any(too_high(o) for o in self._at(history, level))) \
                        or (works and safe < level < failed):
                    return True
        return False

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
        possible = self._lowest_possible(history)
        if possible is not None and top < possible:
            return None  # below the lowest level too high, no pool holds the shortest candidate
        levels = {grid.index(o.memory) for o in history if o.memory is not None}
        high = [i for i in levels if any(too_high(o) for o in self._at(history, i))]
        failed_low = [i for i in levels if self._works(history, i) is False and i not in high]
        floor = max(failed_low, default=grid.lowest - 1)
        open_levels = [i for i in levels if self._works(history, i) is None and floor < i <= top]
        if open_levels:
            return max(open_levels)
        best = max((i for i in levels if self._works(history, i) and i <= top), default=None)
        if top <= floor or (best is not None and best >= top):
            return best  # proven: the level above is too high (or the cap), or nothing above can work
        lower = best if best is not None else floor
        guesses = self._guesses(history)
        wrong = bool(guesses) and self._numbers_wrong(history, guesses)
        if guesses and not (wrong and best is not None):  # once wrong and a level serves, only bisect
            guess = min(s for _, s in guesses)
            if wrong:  # levels they allowed ran out of memory: drop them, gallop down 1, 2, 4 levels
                allowed = max(s for _, s in guesses)
                guess = min(high) - 2 ** max(0, len([i for i in high if i <= allowed]) - 1)
            # never above a level already too high, nor below what the pools say could hold a sequence
            safe = min(top, max(guess, floor + 1, self._lowest_plausible(history) or grid.lowest))
            if lower < safe and safe not in levels:
                return safe
            if best == safe and best + 1 not in levels and not wrong:
                return best + 1  # the numbers say best is the highest: prove it by the level above
        elif not guesses and best is None and top not in levels:
            if high:  # ran out of memory without numbers: gallop down from there
                return max(floor + 1, min(top, min(high) - 2 ** (len(high) - 1)))
            return top
        middle = (lower + top + 1) // 2  # the numbers were wrong, or there are none: bisect the bracket
        return middle if lower < middle and middle not in levels else best

    def _lowest_plausible(self, history: Sequence[Observation]) -> Optional[int]:
        """The lowest level whose pool could hold the shortest candidate, by the pools measured so far
        at their most optimistic (a guess to start from, not a proof: a shorter length may profile
        smaller). None when the pools or the page size are unknown."""
        return self._lowest_holding(history, history)

    def _lowest_possible(self, history: Sequence[Observation]) -> Optional[int]:
        """The same from the pools measured at the shortest candidate itself: a proof, since a pool
        depends on nothing else that changes (None: no such pool)."""
        lowest = self.strategy.space.lowest
        return self._lowest_holding(history, [obs for obs in history if obs.length == lowest])

    def _lowest_holding(self, history: Sequence[Observation], pools: Sequence[Observation]) -> Optional[int]:
        """The lowest level whose pool, by the constant's bounds, holds the shortest candidate (plain attention)
        or has any memory for the KV cache at all (other layouts: below it every start has none)."""
        bounds = self._constant_bounds(history, pools)
        page = self.model.page_bytes(history)
        total = self.model.total(history)
        if bounds is None or not page or not total:
            return None
        need = (self.model.need_bytes(self.strategy.space.lowest, history) or 0.0) if self.model.plain else 0.0
        return self.grid.up((need - bounds[1]) / total)

    def _constant_bounds(self, history: Sequence[Observation],
                         pools: Optional[Sequence[Observation]] = None) -> Optional[Tuple[float, float]]:
        """Bounds on the KV budget's constant: a level's pool is that constant plus utilization x total.
        Each measured pool (of `pools`, else of all trials) bounds it to within a block; together they
        narrow it."""
        total = self.model.total(history)
        sized = [(obs.memory, self.model.kv_range(obs, history)) for obs in (history if pools is None else pools)
                 if obs.memory is not None and ((obs.started and obs.blocks is not None) or _short_by(obs))]
        bounds = [(kv[0] - memory * total, kv[1] - memory * total) for memory, kv in sized if kv and total]
        if not bounds:
            return None
        low, high = max(b[0] for b in bounds), min(b[1] for b in bounds)
        if low > high:  # the pools do not line up (the profile moved): trust the latest alone
            return bounds[-1]
        return low, high

    def _predicted_length(self, history: Sequence[Observation], level: int) -> Optional[int]:
        """The length a new level's pool holds, from the pools measured at other levels (None: unknown).

        The middle of the constant's bounds gives the likelier of the (at most two) block counts they
        allow: the launch verifies it, and a miss costs one launch either way (a start one block too
        long reports vLLM's own estimate; a short one its pool). Where the pool cannot hold the
        shortest candidate, the shortest candidate is what decides the level.
        """
        total, page = self.model.total(history), self.model.page_bytes(history)
        space = self.strategy.space
        shrinking = self._shrinking_pool_length(history, level, launched=False)
        if shrinking is not None:
            return shrinking
        bounds = self._constant_bounds(history)
        if not total or not page or bounds is None:
            return None
        blocks = int(((bounds[0] + bounds[1]) / 2 + self.grid.value(level) * total) // page)
        length = space.floor(self.model.regime.servable_len(blocks, self.model.block_size(history),
                                                            self.model.sliding_window, self.model.sequences))
        ceiling = self._ceiling(history)
        if ceiling is not None and length >= space.floor(ceiling):
            if any(o.length == ceiling + 1 and o.outcome is not Outcome.TOO_LONG_FOR_MODEL and o.fails_everywhere
                   for o in history):
                return None  # the pool reaches past a length that hung: the level's own search decides
            length = space.floor(ceiling)
        if length < space.lowest:
            return space.lowest
        return length if length < space.highest else None

    def _shrinking_pool_length(self, history: Sequence[Observation], level: int,
                               launched: bool = True) -> Optional[int]:
        """Where pools shrink with the length (pool_line.py): the secant over every level's pools, each
        moved to this level, or None. On a level not yet `launched`, no length held there: the crossing
        itself, not a granule above the longest length that held elsewhere."""
        points = self._points_at(history, level)
        return None if points is None else secant_of_points(self.strategy.space, points, above_held=launched,
                                                            block=self.model.block_size(history))

    def _pools_shrink(self, history: Sequence[Observation]) -> bool:
        return shrinks(self._points_at(history, self.grid.highest) or [], self.model.block_size(history))

    def _points_at(self, history: Sequence[Observation], level: int) -> Optional[List[Tuple[int, int]]]:
        """pool_line.points_at_memory at `level`; None where pages or the total are unknown, or the layout
        is not plain attention for one sequence."""
        total, page = self.model.total(history), self.model.page_bytes(history)
        if not total or not page or not self.model.plain or self.model.sequences > 1:
            return None
        return points_at_memory(history, self.grid.value(level), total, page / self.model.block_size(history))

    def propose(self, history: Sequence[Observation]) -> Optional[Candidate]:
        level = self._level(history)
        if level is None:
            return None
        length = None
        if not self._at(history, level):  # a new level: start where the pools (or, before any, the model) say
            length = self._proof_length(history, level)
            if length is None:
                length = self._predicted_length(history, level)
            if length is None and self.prior and not any(obs.blocks is not None for obs in history):
                space = self.strategy.space
                length = self.model.prior_length(self.grid.value(level), space.lowest, space.highest,
                                                 space.granularity)
        else:
            length = self._open_secant(history, level)
        if length is None:
            length = self.strategy.propose(self._view(history, level))
        return None if length is None else self.grid.candidate(level, length)

    def _proof_length(self, history: Sequence[Observation], level: int) -> Optional[int]:
        """Where an OOM's numbers call the level above the best too high and pools shrink with the length: the
        best level's fit (a larger pool surely starts it: the launch cannot fail for its length first, as a
        secant's guess may). None elsewhere (flat pools predict the level's length exactly)."""
        if not self._pools_shrink(history):
            return None
        working = [i for i in {self.grid.index(o.memory) for o in history if o.memory is not None}
                   if self._works(history, i)]
        if not working or level != max(working) + 1:
            return None
        guesses = self._guesses(history)
        if not guesses or min(safe for _, safe in guesses) != max(working) or self._numbers_wrong(history, guesses):
            return None
        return self.strategy.best(self._view(history, max(working)))

    def _open_secant(self, history: Sequence[Observation], level: int) -> Optional[int]:
        """On a level already tried, where pools shrink with the length: the secant over every level's pools,
        if the level's own trials leave it open (None otherwise: the level's length search decides)."""
        length = self._shrinking_pool_length(history, level)
        if length is None:
            return None
        view = self._view(history, level)
        space = self.strategy.space
        state = bracket(view, lowest=space.lowest)
        top = top_candidate(space, state)
        best = best_verified(space, view)
        if top is None or length > top or length in state.tried or not state.allowed(length) \
                or (best is not None and length <= best):
            return None
        return length

    def why_nothing_fits(self, history: Sequence[Observation]) -> Optional[str]:
        return super().why_nothing_fits(history) or squeezed_between(
            self.grid, history, self._lowest_possible(history), "a sequence of %d tokens" % self.strategy.space.lowest)

    def fit(self, history: Sequence[Observation]) -> Optional[int]:
        working = [self.grid.index(o.memory) for o in history if o.outcome is Outcome.OK and o.memory is not None]
        level = max((i for i in working if self._works(history, i)), default=None)
        if level is None:
            return None
        best = self.strategy.best(self._view(history, level))
        if best is None:
            return None
        return last_ok_index(history, lambda o: o.memory is not None and self.grid.index(o.memory) == level
                             and o.length == best)


def _short_by(obs: Observation) -> bool:
    """A start with no memory for the KV cache that printed by how much it fell short: a point on the
    line of the pool against the knob as exact as a pool's."""
    return obs.outcome is Outcome.NO_KV_MEMORY and obs.kv_bytes is not None and obs.kv_bytes < 0
