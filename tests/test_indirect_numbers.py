"""Where vLLM's numbers point at the answer only indirectly (issue 31): pools that shrink with the length,
requests that fail far below the pool, starts that hang. Pure strategy tests, and the hang rules."""

from __future__ import annotations

from typing import Optional

from vllm_fit.logs.capacity import CapacityFacts
from vllm_fit.outcome import Outcome
from vllm_fit.strategies import round_lengths
from vllm_fit.strategies.base import AUTO, LengthSpace, Observation
from vllm_fit.strategies.length import Predict
from vllm_fit.strategies.objectives import LongestAtFixedMemory
from vllm_fit.strategies.pool_line import pool_points, secant_length, secant_of_points
from vllm_fit.strategies.round_lengths import prior_mass, round_probe, roundness
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


def test_a_level_not_yet_launched_starts_at_the_crossing_itself():
    """Indirect world 018 (V0 0.6.3, a request OOM beside another process, granularity 1024): the pools of six
    levels moved to 0.82 hold 22892-22938 tokens, 22528 held and 24576 did not. On a level already launched at
    22528 the next candidate is a granule above it (23552); on 0.82, not yet launched, it is the crossing's
    22528, which its own pool proves longest (23552 cost a too-long launch first: 8 launches, now 7)."""
    space = LengthSpace(1, 32768, 1024)
    points = [(20480, 22892), (25600, 22899), (25600, 22907), (24576, 22922), (21504, 22936), (22528, 22938)]
    assert secant_of_points(space, points) == 23552
    assert secant_of_points(space, points, above_held=False) == 22528


def test_a_crossing_within_a_block_of_the_held_reach_takes_the_reach():
    """Indirect world 033 (vLLM 0.28, pools shrinking with the length, granularity 1, 16-token blocks): 29822
    held with a reach of 29825, 30177 reached 29793. The line drops 0.3 tokens from 29822 to 29825, which the
    block rounding of the held pool hides: 29825, which no longer length can beat and which its own pool
    proves, is launched first, not after 29824 (5 launches, now 4). Held-out world 000 of seed 4242 (vLLM
    0.13): the line drops 41 tokens over the 12 from 15349 to its reach 15361, more than a block; the line's
    15351 stays the candidate (the reach was refused there: 7 launches became 8). No block known: the line."""
    space = LengthSpace(1, 32768, 1)
    points = [(29822, 29825), (30177, 29793)]
    assert secant_of_points(space, points, block=16) == 29825
    assert secant_of_points(space, points) == 29824
    assert secant_of_points(space, [(13973, 20065), (15349, 15361), (18246, 5425)], block=16) == 15351


def test_a_pool_that_does_not_shrink_leaves_the_hint_in_charge():
    history = [obs(19968, Outcome.KV_TOO_SMALL, 9000), obs(2048, Outcome.OK, 9000)]
    assert secant_length(SPACE, history) is None
    assert Predict(SPACE).propose(history) == 8960


def test_a_fixed_kv_size_never_reads_as_a_pool_that_shrinks():
    """vLLM 0.28, Gemma 3 at 6 MiB: the too-long start's estimate gives a pessimistic 3840, the start at
    3840 an exact 3968. With kv_cache_memory_bytes the pool is the same at every length, so the two are not
    a shrinking line (whose crossing, 3967, cost a launch): 3968 is next."""
    space = LengthSpace(1, 32768, 1)
    history = [Observation(32768, 32768, Outcome.KV_TOO_SMALL, hint=3840, kv_fixed=True),
               Observation(3840, 3840, Outcome.OK, hint=3968, kv_fixed=True, fixed_pool_bound=3968)]
    assert pool_points(history) == [] and secant_length(space, history) is None
    assert Predict(space).propose(history) == 3968


def test_no_memory_for_the_cache_at_a_long_length_is_not_yet_nothing_fits():
    """A profile that grows with max_model_len can leave nothing at 32768 and plenty at 128."""
    objective = LongestAtFixedMemory(Predict(SPACE), utilization=0.84)
    history = [obs(32768, Outcome.NO_KV_MEMORY)]
    assert objective.propose(history).max_model_len == SPACE.lowest
    history.append(obs(SPACE.lowest, Outcome.NO_KV_MEMORY))
    assert objective.propose(history) is None
    assert "no memory is left for the KV cache" in objective.why_nothing_fits(history)


def test_no_memory_for_the_cache_at_an_auto_fit_start_is_not_yet_nothing_fits():
    """Auto-fit profiles at the model's full length: no KV memory there said "nothing fits" after one
    launch where 14096 tokens serve (a simulated vLLM 0.32 world, seed 779); the shortest comes next."""
    objective = LongestAtFixedMemory(Predict(SPACE, use_autofit=True), utilization=0.95)
    history = [Observation(AUTO, None, Outcome.NO_KV_MEMORY)]
    assert objective.propose(history).max_model_len == SPACE.lowest
    history.append(obs(SPACE.lowest, Outcome.NO_KV_MEMORY))
    assert objective.propose(history) is None


def test_a_request_failing_far_below_its_pool_is_bisected_not_walked_down():
    """The pool holds 40000 tokens; the 8192-token request hangs: the shortest length next (is anything
    served, and how long does a request take), then a bisection's length, never 8064."""
    first = obs(8192, Outcome.REQUEST_FAILED, 40000)
    assert first.fails_everywhere
    assert Predict(SPACE).propose([first]) == SPACE.lowest
    proposed = Predict(SPACE).propose([first, obs(SPACE.lowest, Outcome.OK, 40000)])
    assert proposed is not None and proposed <= 4096 + 128


def test_a_request_failing_where_vllm_only_printed_its_concurrency_is_far_below_the_pool():
    """vLLM 0.20.1+ prints no block count (its token figure is derived from the concurrency), so a request
    that failed has no hint; its "Maximum concurrency for 16,384 tokens per request: 23.37x" still says the
    pool holds it 23 times over (not the KV cache's edge). At 1.00x it may be the edge; 1.01x at 1024
    blocks a request is ten blocks to spare, not two requests."""
    far = Observation(16384, 16384, Outcome.REQUEST_FAILED, held=23.37)
    assert far.fails_below_pool and far.fails_with_room and far.fails_everywhere
    assert not Observation(16384, 16384, Outcome.REQUEST_FAILED, held=1.0).fails_below_pool
    near = Observation(16384, 16384, Outcome.REQUEST_FAILED, held=1.01, block_size=16)
    assert near.fails_with_room and not near.fails_everywhere
    facts = CapacityFacts(kv_cache_tokens=382896, concurrency_len=16384, max_concurrency=23.37)
    trial = TrialRecord(index=1, llm_kwargs={"max_model_len": 16384}, outcome=Outcome.REQUEST_FAILED, detail="",
                        duration_s=5.0, length=16384, hint=None, facts=facts, evidence=())
    assert trial.observation().fails_everywhere
    assert Predict(SPACE).propose([trial.observation()]) == SPACE.lowest  # not one granule below it


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
    """Served 4096 with a pool of 40000 tokens, 32768 hung: the prior's probe (round_lengths.py), never
    32640 (one granule below the hang); a pool that ends below the hang is still followed."""
    history = [obs(32768, Outcome.TIMEOUT), obs(4096, Outcome.OK, 40000)]
    proposed = Predict(SPACE).propose(history)
    assert proposed is not None and 4096 < proposed <= 16384 and proposed % 128 == 0
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


def test_roundness_counts_zero_bits_and_decimal_zeros():
    assert [roundness(x) for x in (8192, 6144, 6000, 20480, 24000, 6001, 0)] == [13, 11, 9, 12, 9, 0, 0]


def test_the_prior_mass_is_the_sum_over_every_candidate():
    """The closed form (harmonic sums over multiples of powers of two and ten) equals the plain sum."""
    g_weight = round_lengths.ROUND_WEIGHT
    below = round_lengths.BELOW_ROUND

    exponent, floor = round_lengths.ROUND_EXPONENT, round_lengths.SCALE_FLOOR

    def weight(x: int, granularity: int) -> float:
        above = x + granularity
        return ((1 + g_weight * (1 - below) * 2 ** (exponent * roundness(x))) / max(x, floor)
                + g_weight * below * 2 ** (exponent * roundness(above)) / max(above, floor))

    ranges = [(1, 1000, 1), (1000, 5000, 16), (4097, 8191, 1), (256, 131072, 256), (6000, 6000, 1), (4000, 4200, 8)]
    for low, high, granularity in ranges:
        plain = sum(weight(x, granularity) for x in range(-(-low // granularity) * granularity, high + 1, granularity))
        assert abs(prior_mass(low, high, granularity) - plain) < 1e-6 * plain  # the harmonic series' error


def test_the_probe_halves_the_prior_and_lands_on_round_lengths():
    """Nothing served yet over 1024-65535: near the middle of the scale (8192), far below the middle of the
    range (33280); over a narrow range above a round length that served, the length just above it. Each
    probe is a candidate (a multiple of the granularity) in the range."""
    assert 4096 <= round_probe(None, 65535, 1024, 1) <= 16384
    assert round_probe(8192, 8192 + 32, 1024, 1) == 8193
    assert round_probe(8192, 8192 + 2048, 1024, 256) == 8448
    for known_ok, top, granularity in [(1024, 32767, 1), (4097, 8191, 1), (256, 131072, 256), (1, 100, 1)]:
        probe = round_probe(known_ok, top, 1, granularity)
        assert known_ok < probe <= top and probe % granularity == 0


def _launches(boundary: int, space: LengthSpace, outcome: Outcome) -> tuple:
    """Predict against a length boundary that gives one bit a launch (a start that hangs above it, or a
    request failing above it with a pool of 10 maximal lengths); the answer and the launches."""
    history: list = []
    strategy = Predict(space)
    while True:
        length = strategy.propose(history)
        if length is None:
            return strategy.best(history), len(history)
        served = length <= boundary
        history.append(obs(length, Outcome.OK if served else outcome, None if outcome is Outcome.TIMEOUT
                           else 10 * space.highest))


def _bisection_launches(boundary: int, space: LengthSpace) -> int:
    low, high, launches = space.lowest - space.granularity, space.highest + space.granularity, 1
    while high - low > space.granularity:
        middle = (low // space.granularity + high // space.granularity) // 2 * space.granularity
        low, high = (middle, high) if middle <= boundary else (low, middle)
        launches += 1
    return launches


def test_a_round_boundary_that_gives_one_bit_a_launch_is_found_in_few_launches():
    """A start hanging above 8192, 20480, 6000 or 30000, or a request failing above them, with granularity 1
    over 1024-65536: a bisection needs 16-17 launches, the prior's probes 7-13 (the first two: the
    model's length, which hangs, and the shortest). A limit one below a round length (5999, 65535) costs
    about as much; a boundary on no round number at most five launches more than a bisection."""
    space = LengthSpace(1024, 65536, 1)
    for outcome in (Outcome.TIMEOUT, Outcome.REQUEST_FAILED):
        assert _launches(8192, space, outcome) == (8192, 7)
        assert _launches(20480, space, outcome) == (20480, 9)
        assert _launches(6000, space, outcome) == (6000, 11)
        assert _launches(30000, space, outcome) == (30000, 10)
        assert _launches(5999, space, outcome) == (5999, 13)
        assert _launches(65535, space, outcome) == (65535, 8)
    for boundary in (6001, 12345, 40001, 1024):
        answer, launches = _launches(boundary, space, Outcome.TIMEOUT)
        assert answer == boundary
        assert launches <= _bisection_launches(boundary, space) + 5


def test_a_request_failing_with_blocks_to_spare_is_not_walked_down_a_granule():
    """The pool holds the length and 29 blocks more (1.01x): not the KV cache's edge, so no granule step, not
    even after a shorter length served with the same pool (its hint reaches past the failure: it says
    nothing about where the failure begins)."""
    first = Observation(32768, 32768, Outcome.REQUEST_FAILED, hint=33232, block_size=16)
    assert first.fails_with_room and not first.fails_everywhere
    space = LengthSpace(1024, 32768, 256)
    proposed = Predict(space).propose([first])
    assert proposed is not None and 1024 < proposed <= 16384 and proposed % 256 == 0
    served = Observation(proposed, proposed, Outcome.OK, hint=33232, block_size=16)
    following = Predict(space).propose([first, served])
    assert following is not None and proposed < following < 32512 and following % 256 == 0


def test_an_auto_fit_start_that_hung_bounds_the_search_like_the_full_length_would():
    """vLLM's auto-fit configures the model's full length before it fits it: a hang there is a hang of the
    full length, so the pool of a short start that served does not send the search one granule below it."""
    space = LengthSpace(16, 32768, 16)
    hung = Observation(-1, None, Outcome.TIMEOUT)
    served = obs(16, Outcome.OK, 400000)
    proposed = Predict(space, use_autofit=True).propose([hung, served])
    assert proposed is not None and 16 < proposed <= 16384
