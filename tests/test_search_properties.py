"""Property tests: in many synthetic worlds every strategy finds the true maximum and never more.

A world is a KV pool (in blocks) as a function of max_model_len and what vLLM would print about it:
  flat      the pool does not depend on the length (V1); estimates, block counts and auto-fit exact
  shrinking the pool shrinks as the length grows (V0 profiling); exact numbers, no auto-fit
  missing   no numbers at all: only started / failed
  wrong     too-long estimates off by up to 50% either way; block counts exact
A length fits iff ceil(L / block_size) + 1 null block <= pool(L).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, List, Optional

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from vllm_fit.outcome import Outcome
from vllm_fit.strategies.base import AUTO, LengthSpace, Observation
from vllm_fit.strategies.length import Bisect, Doubling, Predict

NULL = 1


@dataclass
class World:
    block_size: int
    pool: Callable[[int], int]
    derived_max: int
    estimates: str = "exact"  # exact | missing | wrong
    block_hints: bool = True
    error_factor: float = 1.0

    def max_len_for_pool(self, blocks: int) -> int:
        return max(0, blocks - NULL) * self.block_size

    def fits(self, length: int) -> bool:
        return length <= self.derived_max and -(-length // self.block_size) + NULL <= self.pool(length)

    def true_max(self, space: LengthSpace) -> Optional[int]:
        fitting = [L for L in range(space.lowest, space.highest + 1, space.granularity) if self.fits(L)]
        return max(fitting) if fitting else None

    def observe(self, requested: int) -> Observation:
        if requested == AUTO:
            pool = self.pool(self.derived_max)
            length = min(self.derived_max, self.max_len_for_pool(pool))
            if length < 1:
                return Observation(AUTO, None, Outcome.NO_KV_MEMORY)
            return Observation(AUTO, length, Outcome.OK, hint=length)
        if requested > self.derived_max:
            return Observation(requested, requested, Outcome.TOO_LONG_FOR_MODEL, derived_max=self.derived_max)
        exact = self.max_len_for_pool(self.pool(requested))
        if self.fits(requested):
            return Observation(requested, requested, Outcome.OK, hint=exact if self.block_hints else None)
        if self.pool(requested) <= NULL:
            return Observation(requested, requested, Outcome.NO_KV_MEMORY)
        estimate = {"exact": exact, "missing": None,
                    "wrong": int(exact * self.error_factor)}[self.estimates]
        return Observation(requested, requested, Outcome.KV_TOO_SMALL, hint=estimate)


def run(strategy, world: World, limit: int = 200) -> (Optional[int], List[Observation]):
    history: List[Observation] = []
    for _ in range(limit):
        requested = strategy.propose(history)
        if requested is None:
            return strategy.best(history), history
        assert requested not in [o.requested for o in history if o.requested != AUTO], "no repeats"
        history.append(world.observe(requested))
    raise AssertionError("strategy did not stop")


spaces = st.builds(
    lambda g, lo, span: LengthSpace(lo, lo + span, g),
    st.sampled_from([1, 16, 128, 256]), st.integers(1, 2048), st.integers(512, 40000),
)
block_sizes = st.sampled_from([16, 64, 128])


@st.composite
def worlds(draw, kind: str) -> World:
    bs = draw(block_sizes)
    derived = draw(st.integers(1024, 131072))
    base = draw(st.integers(0, 4000))
    if kind == "shrinking":
        slope = draw(st.floats(0.0, 0.02))
        return World(bs, lambda L: max(0, base - int(slope * L / bs)), derived)
    if kind == "missing":
        return World(bs, lambda L: base, derived, estimates="missing", block_hints=False)
    if kind == "wrong":
        return World(bs, lambda L: base, derived, estimates="wrong",
                     error_factor=draw(st.floats(0.5, 1.5)))
    return World(bs, lambda L: base, derived)


def _space_within(space: LengthSpace, world: World) -> LengthSpace:
    """The CLI caps --max-len at the model's maximum (and refuses --min-len above it)."""
    assume(space.min_len <= world.derived_max)
    return LengthSpace(space.min_len, max(space.min_len, min(space.max_len, world.derived_max)),
                       space.granularity)


@settings(max_examples=300, deadline=None)
@given(space=spaces, world=st.one_of(*(worlds(kind) for kind in ("flat", "shrinking", "missing", "wrong"))),
       autofit=st.booleans())
def test_predict_and_bisect_find_the_true_maximum(space, world, autofit):
    space = _space_within(space, world)
    truth = world.true_max(space)
    use_autofit = autofit and world.estimates == "exact" and space.max_len == world.derived_max \
        and world.pool(1) == world.pool(world.derived_max)
    for strategy in (Predict(space, use_autofit=use_autofit), Bisect(space)):
        found, history = run(strategy, world)
        assert found == truth, (strategy.name, found, truth, history)
        assert all(o.requested <= space.highest for o in history if o.requested != AUTO)


@settings(max_examples=200, deadline=None)
@given(space=spaces, world=worlds("flat"))
def test_predict_needs_at_most_two_launches_when_vllm_prints_its_numbers(space, world):
    space = _space_within(space, world)
    for use_autofit in (False, space.max_len == world.derived_max):
        found, history = run(Predict(space, use_autofit=use_autofit), world)
        assert found == world.true_max(space)
        assert len(history) <= 2, history


@settings(max_examples=200, deadline=None)
@given(space=spaces, world=st.one_of(worlds("flat"), worlds("shrinking"), worlds("missing")))
def test_doubling_finds_the_longest_power_of_two_and_never_more(space, world):
    space = _space_within(space, world)
    found, _history = run(Doubling(space), world)
    powers = [2 ** k for k in range(0, 20) if space.min_len <= 2 ** k <= space.max_len and world.fits(2 ** k)]
    assert found == (max(powers) if powers else None)
    truth = world.true_max(LengthSpace(space.min_len, space.max_len, 1))
    assert found is None or (truth is not None and found <= truth)


def test_too_long_for_model_is_never_proposed_again():
    world = World(128, lambda L: 100, derived_max=8192)
    space = LengthSpace(1, 65536, 1)  # a hub model: the maximum was not known before launching
    found, history = run(Predict(space), world)
    assert history[0].outcome is Outcome.TOO_LONG_FOR_MODEL
    assert all(o.requested <= 8192 for o in history[1:])
    assert found == world.true_max(LengthSpace(1, 8192, 1))


def test_predict_on_the_measured_cpu_example():
    """40 blocks of 128 tokens, vLLM 0.29+: the true maximum is 4992 (39 usable blocks)."""
    world = World(128, lambda L: 40, derived_max=32768)
    assert run(Predict(LengthSpace(1, 32768, 1), use_autofit=True), world)[0] == 4992
    found, history = run(Predict(LengthSpace(1, 32768, 256), use_autofit=True), world)
    assert (found, len(history)) == (4864, 2)
    found, history = run(Predict(LengthSpace(1, 32768, 1)), world)
    assert (found, [o.requested for o in history]) == (4992, [32768, 4992])


@settings(max_examples=300, deadline=None)
@given(space=spaces, world=worlds("shrinking"))
def test_where_pools_shrink_with_the_length_predict_steps_along_their_line(space, world):
    """Two measured pools define the line the answer sits on (issue 31): a secant step, not a bisection."""
    space = _space_within(space, world)
    found, history = run(Predict(space), world)
    assert found == world.true_max(space)
    assert len(history) <= 6, history
