"""Where vLLM's numbers point at the answer only indirectly (issue 31): pools that shrink with the length,
requests that fail far below the pool, starts that hang. Pure strategy tests, and the hang rules."""

from __future__ import annotations

from typing import Optional

from vllm_fit.logs.capacity import CapacityFacts
from vllm_fit.outcome import Outcome
from vllm_fit.strategies.base import LengthSpace, Observation
from vllm_fit.strategies.length import Predict
from vllm_fit.strategies.objectives import LongestAtFixedMemory
from vllm_fit.strategies.pool_line import pool_points, secant_length
from vllm_fit.trial.hangs import boundary_text, confirmed, derived_deadlines
from vllm_fit.trial.record import TrialRecord

SPACE = LengthSpace(1, 32768, 128)


def obs(length: int, outcome: Outcome, hint: Optional[int] = None) -> Observation:
    return Observation(length, length, outcome, hint=hint)


def test_two_pools_on_a_shrinking_line_give_the_crossing():
    """V0 without chunked prefill: 2048 holds 20096, 19968 holds 2176 (one token less per token longer):
    the line holds its own length at 11072, so the candidate is 11008, not a bisection's 10880."""
    history = [obs(19968, Outcome.KV_TOO_SMALL, 2176), obs(2048, Outcome.OK, 20096)]
    assert pool_points(history) == [(19968, 2176), (2048, 20096)]
    assert secant_length(SPACE, history) == 11008
    assert Predict(SPACE).propose(history) == 11008


def test_a_pool_that_does_not_shrink_leaves_the_hint_in_charge():
    history = [obs(19968, Outcome.KV_TOO_SMALL, 9000), obs(2048, Outcome.OK, 9000)]
    assert secant_length(SPACE, history) is None
    assert Predict(SPACE).propose(history) == 8960


def test_no_memory_for_the_cache_at_a_long_length_is_not_yet_nothing_fits():
    """A profile that grows with max_model_len can leave nothing at 32768 and plenty at 128."""
    objective = LongestAtFixedMemory(Predict(SPACE), utilization=0.84)
    history = [obs(32768, Outcome.NO_KV_MEMORY)]
    assert objective.propose(history).max_model_len == SPACE.lowest
    history.append(obs(SPACE.lowest, Outcome.NO_KV_MEMORY))
    assert objective.propose(history) is None
    assert "no memory is left for the KV cache" in objective.why_nothing_fits(history)


def test_a_request_failing_far_below_its_pool_is_bisected_not_walked_down():
    """The pool holds 40000 tokens; the 8192-token request hangs: the shortest length next (is anything
    served, and how long does a request take), then a bisection's length, never 8064."""
    first = obs(8192, Outcome.REQUEST_FAILED, 40000)
    assert first.fails_everywhere
    assert Predict(SPACE).propose([first]) == SPACE.lowest
    proposed = Predict(SPACE).propose([first, obs(SPACE.lowest, Outcome.OK, 40000)])
    assert proposed is not None and proposed <= 4096 + 128


def test_a_request_failing_just_inside_its_pool_steps_down_one_granule_once():
    """vLLM's null-block hang: the pool holds the length by a block; one granule down, then bisect."""
    first = obs(8192, Outcome.REQUEST_FAILED, 8200)
    assert not first.fails_everywhere
    assert Predict(SPACE).propose([first]) == 8064
    second = obs(8064, Outcome.REQUEST_FAILED, 8070)
    proposed = Predict(SPACE).propose([first, second])
    assert proposed is not None and proposed < 8064 - 128


def test_after_a_hang_with_nothing_served_the_shortest_length_comes_next():
    assert Predict(SPACE).propose([obs(32768, Outcome.TIMEOUT)]) == SPACE.lowest


def test_a_pool_reaching_past_a_hang_does_not_walk_down_to_it():
    """Served 4096 with a pool of 40000 tokens, 32768 hung: bisect, never 32640 (one granule below the hang);
    a pool that ends below the hang is still followed."""
    history = [obs(32768, Outcome.TIMEOUT), obs(4096, Outcome.OK, 40000)]
    assert Predict(SPACE).propose(history) == 18432
    assert Predict(SPACE).propose([obs(32768, Outcome.TIMEOUT), obs(4096, Outcome.OK, 30000)]) == 29952


def record(index: int, length: int, outcome: Outcome, seconds: float, request_s: Optional[float] = None,
           timeout_s: float = 600.0) -> TrialRecord:
    return TrialRecord(index=index, llm_kwargs={"max_model_len": length}, outcome=outcome, detail="",
                       duration_s=seconds, length=length, hint=None, facts=CapacityFacts(), evidence=(),
                       request={"seconds": request_s} if request_s is not None else None, timeout_s=timeout_s)


def test_the_deadlines_follow_the_slowest_measured_start_and_request():
    """Nothing served: the user's timeouts. Then 3 x the slowest start, and 3 x the slowest request grown with
    the length, each floored at a tenth of the user's timeout and never above it."""
    assert derived_deadlines([record(1, 32768, Outcome.TIMEOUT, 600)], 600, None, 16384) == (None, None)
    served = [record(1, 4096, Outcome.OK, 40.0, request_s=30.0)]
    assert derived_deadlines(served, 600, None, 4096) == (60.0, 90.0)
    assert derived_deadlines(served, 600, None, 8192) == (60.0, 180.0)
    assert derived_deadlines(served, 600, 120, 8192) == (60.0, 120)
    slow = [record(1, 4096, Outcome.OK, 500.0, request_s=1)]
    assert derived_deadlines(slow, 600, None, 4096) == (600, 60.0)


def test_a_boundary_rests_on_a_length_that_hung_twice():
    records = [record(1, 8192, Outcome.OK, 40.0, request_s=1), record(2, 8320, Outcome.TIMEOUT, 121, timeout_s=120)]
    assert not confirmed(records) and boundary_text(records) is None
    records.append(record(3, 8320, Outcome.TIMEOUT, 121, timeout_s=120))
    assert confirmed(records)
    assert boundary_text(records) == ("the boundary is a hang: max_model_len=8320 never finished starting, 2 times"
                                      " (trial 2 after 120 s and trial 3 after 120 s); counted as not starting")
