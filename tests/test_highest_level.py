"""The default objective's choice of the next utilization level and length, on hand-made histories.

Pure: observations in, the next candidate out. Each case is one rule of strategies/highest.py, from a
failure class of issue 8 that the simulator worlds found (tests/simulator/worlds.py names them).
"""

from __future__ import annotations

import pytest

from vllm_fit.logs.regime import Regime
from vllm_fit.outcome import OomStage, Outcome
from vllm_fit.strategies.base import LengthSpace, Observation
from vllm_fit.strategies.highest import LongestAtHighestUtilization
from vllm_fit.strategies.knob import KvModel, utilization_grid
from vllm_fit.strategies.length import Predict

GIB, MIB = 1 << 30, 1 << 20
TOTAL = 22 * GIB
PAGE = 16 * 131072  # llama-8b: one block of 16 tokens


def objective(space: LengthSpace, version: str = "0.32.0", per_token: int = 131072):
    model = KvModel(bytes_per_token=per_token, total_bytes=TOTAL, regime=Regime.of(version))
    return LongestAtHighestUtilization(utilization_grid(0.95), lambda: Predict(space), model)


def request_oom(util: float, length: int, blocks: int, shortfall: float) -> Observation:
    return Observation(length, length, Outcome.OOM, memory=util, blocks=blocks, block_size=16,
                       oom_shortfall_bytes=shortfall, oom_stage=OomStage.REQUEST)


def test_numbers_that_allowed_a_level_that_ran_out_are_dropped_for_a_gallop_down():
    """The first OOM's numbers said one step down, and 0.94 ran out too: from then on no error's
    numbers steer (the second one's point ten levels down); the search gallops down from the lowest
    level that ran out, 1, 2, then 4 levels, instead of walking 0.01 at a time or jumping far."""
    space = LengthSpace(1, 32768, 16)
    step = 0.01 * TOTAL
    history = [request_oom(0.95, 30000, 2000, 0.5 * step), request_oom(0.94, 29000, 1890, 10 * step)]
    search = objective(space)
    taken = []
    for blocks in (1780, 1670):
        nxt = search.propose(history)
        taken.append(nxt.gpu_memory_utilization)
        history.append(request_oom(nxt.gpu_memory_utilization, nxt.max_model_len, blocks, 0.5 * step))
    taken.append(search.propose(history).gpu_memory_utilization)
    assert taken == [0.93, 0.91, 0.87]


def test_a_level_that_serves_above_what_the_numbers_allowed_ends_their_use():
    """The numbers said 0.90; 0.90 and 0.91 served: bisect up to 0.94, never another 0.01 step."""
    space = LengthSpace(1, 131072, 16)
    shortfall = 0.055 * TOTAL
    history = [request_oom(0.95, 24000, 1555, shortfall),
               Observation(15856, 15856, Outcome.OK, hint=15856, memory=0.90, blocks=992, block_size=16),
               Observation(17664, 17664, Outcome.OK, hint=17664, memory=0.91, blocks=1105, block_size=16)]
    assert objective(space).propose(history).gpu_memory_utilization == 0.93


def test_the_numbers_never_send_the_search_below_the_level_that_could_hold_the_shortest_length():
    """A pool of 380 blocks at 0.81 and 110 blocks a level: 4096 tokens (257 blocks) need 0.80 at least."""
    space = LengthSpace(4096, 65536, 1024)
    history = [request_oom(0.81, 5120, 380, 0.06 * TOTAL)]
    model_page = 0.01 * TOTAL / PAGE  # blocks per level
    assert 100 < model_page < 120
    nxt = objective(space, "0.17.1").propose(history)
    assert nxt.gpu_memory_utilization == 0.80 and nxt.max_model_len == 4096


def test_a_length_over_the_models_maximum_at_one_level_is_over_it_at_every_level():
    """vLLM said the maximum is 32768 at 0.93: the next level starts at most there, and its length
    search never proposes above it."""
    space = LengthSpace(1, 131072, 128)
    history = [request_oom(0.95, 50000, 3144, 0.2 * TOTAL),
               Observation(41984, 41984, Outcome.TOO_LONG_FOR_MODEL, derived_max=32768, memory=0.93)]
    search = objective(space)
    nxt = search.propose(history)
    assert nxt.max_model_len <= 32768
    served = [*history, Observation(nxt.max_model_len, nxt.max_model_len, Outcome.OK, hint=40000,
                                    memory=nxt.gpu_memory_utilization, blocks=2500, block_size=16)]
    following = search.propose(served)
    assert following is None or following.max_model_len <= 32768


def test_a_sliding_window_on_v1_does_not_rule_levels_out_by_the_full_attention_need():
    """With a window on V1 the full-attention need is only an upper bound: no level is ruled out by it, only
    the levels whose pool, on the line of the measured one, has no memory at all (hybrid-025 of the random
    seed 2027, vLLM 0.10.2 with a window: 0.67, then 0.68, 0.69 and 0.70 each started without KV memory)."""
    model = KvModel(bytes_per_token=131072, total_bytes=TOTAL, regime=Regime.of("0.32.0"), sliding_window=4096,
                    plain=False)
    search = LongestAtHighestUtilization(utilization_grid(0.95), lambda: Predict(LengthSpace(30000, 32768, 16)),
                                         model)
    history = [request_oom(0.95, 32768, 2000, 0.06 * TOTAL)]
    no_memory_below = search.grid.up(0.95 - 2001 * PAGE / TOTAL)
    full_attention_need = search.grid.up(0.95 - (2001 - 30000 // 16) * PAGE / TOTAL)
    assert search._lowest_plausible(history) == no_memory_below < full_attention_need


def test_without_auto_fit_the_first_launch_is_a_length_that_starts_where_the_longest_cannot():
    """26 GiB of weights on 40 GiB: even with nothing else beside them, 131072 tokens (16 GiB of KV)
    cannot fit at 0.95, so the first launch leaves 4 + 2 GiB for the activations, graphs and context:
    (38 - 27.3 - 6) GiB / 128 KiB a token. On 80 GiB the longest candidate may fit: launched as it is."""
    space = LengthSpace(1, 131072, 16)

    def first(total: float) -> int:
        model = KvModel(bytes_per_token=131072, total_bytes=total, regime=Regime.of("0.11.0"),
                        weights_bytes=26 * GIB)
        search = LongestAtHighestUtilization(utilization_grid(0.95), lambda: Predict(space), model, prior=True)
        return search.propose([]).max_model_len

    spare = 0.95 * 40 * GIB - 1.05 * 26 * GIB - 0.1 * 40 * GIB - 2 * GIB
    assert first(40 * GIB) == (int(spare // PAGE) - 1) * 16  # one block held back for the request (V1 0.8+)
    assert first(80 * GIB) == 131072
    # 16 GiB of KV beside 26 GiB of weights and half a GiB for the context and activations: 42.5 GiB,
    # 95% of 44.7 GiB
    assert first(45 * GIB) == 131072 and first(44 * GIB) < 131072


def test_pools_measured_at_the_shortest_length_prove_the_levels_below_too_small():
    """Class 3: 4096 tokens ran out of memory on the request at 0.81 and 0.80 (380 and 268 blocks,
    about 112 a level). 0.79 would hold about 156 blocks, fewer than the 257 that 4096 tokens need:
    nothing fits, proven without launching 0.79, and the reason names both ends."""
    space = LengthSpace(4096, 65536, 1024)
    search = objective(space, "0.17.1")
    history = [request_oom(0.81, 4096, 380, 1.86 * GIB), request_oom(0.80, 4096, 268, 1.86 * GIB)]
    assert search.propose(history) is None
    why = search.why_nothing_fits(history)
    assert "0.8 and above" in why and "0.79 and below" in why and "4096 tokens" in why


def test_pools_measured_at_longer_lengths_only_guide_the_levels_below():
    """The same pools measured at 8192 tokens: a shorter length may profile smaller and get a larger
    pool, so 0.79 is not ruled out without a launch."""
    space = LengthSpace(4096, 65536, 1024)
    history = [request_oom(0.81, 8192, 380, 1.86 * GIB), request_oom(0.80, 8192, 268, 1.86 * GIB)]
    nxt = objective(space, "0.17.1").propose(history)
    assert nxt is not None and nxt.gpu_memory_utilization <= 0.79


def test_the_gallop_counts_only_the_levels_the_numbers_allowed():
    """0.81 found too little free memory (not the numbers' doing); 0.79's numbers allowed 0.76, which
    ran out too: the gallop's first step is one level, to 0.75, not two."""
    space = LengthSpace(1, 32768, 128)
    step = 0.01 * TOTAL
    history = [Observation(32768, 32768, Outcome.FREE_MEMORY_SHORT, memory=0.81, free_fraction=0.793),
               request_oom(0.79, 27136, 1699, 2.6 * step), request_oom(0.76, 14592, 919, 0.5 * step)]
    assert objective(space, "0.28.0").propose(history).gpu_memory_utilization == 0.75


def test_a_new_level_starts_at_the_likelier_of_the_two_pools_the_measured_ones_allow():
    """993 blocks at 0.90 put 0.94's pool at 993.0-994.0 + 450.6 blocks: 1443 or 1444, 1444 the
    likelier (0.56 of the range). The search starts 0.94 there (1443 blocks after the null block, on
    0.32), not one block short."""
    space = LengthSpace(1, 131072, 16)
    search = objective(space)
    history = [Observation(15872, 15872, Outcome.OK, hint=15872, memory=0.90, blocks=993, block_size=16)]
    assert pytest.approx(450.56) == 0.04 * TOTAL / PAGE
    assert search._predicted_length(history, search.grid.index(0.94)) == 1443 * 16


def test_the_level_the_numbers_say_is_too_high_is_launched_at_the_fit_below_it_where_pools_shrink():
    """0.95 ran out of memory on the request, its numbers allow 0.93; at 0.93 26112 was too long (its pool
    reached 26064) and 25856 served (26144): the pools shrink with the length, so the length the pools
    predict at 0.94 is a guess that may fail first (indirect world 024: 26624 did, one launch more). 0.94
    is launched at 25856, which its larger pool surely starts: the launch answers whether 0.94 runs out of
    memory. Where the pools are flat, their prediction is exact and is launched as before."""
    space = LengthSpace(1024, 131072, 256)
    step = 0.01 * TOTAL
    too_long = Observation(26112, 26112, Outcome.KV_TOO_SMALL, hint=26064, memory=0.93)
    served = Observation(25856, 25856, Outcome.OK, hint=26144, memory=0.93, blocks=1634, block_size=16)
    history = [request_oom(0.95, 25600, 1715, 1.5 * step), too_long, served]
    proposed = objective(space).propose(history)
    assert (proposed.gpu_memory_utilization, proposed.max_model_len) == (0.94, 25856)
    flat = [request_oom(0.95, 25600, 1715, 1.5 * step), served]
    proposed = objective(space).propose(flat)
    assert proposed.gpu_memory_utilization == 0.94 and proposed.max_model_len > 25856


def test_a_start_with_no_memory_for_the_cache_says_how_far_up_the_shortest_length_holds():
    """random-021 of seed 2027 (vLLM 0.8.5 falling back to V0, another process on the card): out of memory
    from 0.80 up, then no memory at all for the KV cache at 0.64, 1.07 GiB short at the shortest length.
    That shortfall is a point on the pool's line: the next level is where the shortest length holds
    (0.64 + 1.07 / 21.96 -> 0.69), not 0.65, 0.66 ... walked two launches a level (23 launches -> 12)."""
    space = LengthSpace(256, 32768, 256)
    total = 21.96 * GIB
    model = KvModel(bytes_per_token=131072, total_bytes=total, regime=Regime.of("0.8.5"))
    search = LongestAtHighestUtilization(utilization_grid(0.95), lambda: Predict(space), model)
    history = [Observation(32768, 32768, Outcome.OOM, memory=util, oom_shortfall_bytes=shortfall * MIB,
                           oom_stage=OomStage.KV_ALLOCATION, total_bytes=total)
               for util, shortfall in ((0.95, 7.1), (0.94, 30.0), (0.92, 40.0), (0.88, 50.0), (0.80, 56.0))]
    history += [Observation(32768, 32768, Outcome.NO_KV_MEMORY, memory=0.64, blocks=0, kv_bytes=-1.07 * GIB,
                            total_bytes=total),
                Observation(256, 256, Outcome.NO_KV_MEMORY, memory=0.64, blocks=0, kv_bytes=-1.02 * GIB,
                            total_bytes=total)]
    assert search.propose(history).gpu_memory_utilization == 0.69
    history[-2:] = [Observation(length, length, Outcome.NO_KV_MEMORY, memory=0.64, blocks=0, total_bytes=total)
                    for length in (32768, 256)]
    assert search.propose(history).gpu_memory_utilization == 0.65  # no shortfall printed: one level up
