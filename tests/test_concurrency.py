"""--concurrency N in vLLM's own block counting: N full-length sequences at once, null block and V0's
watermark counted as each version counts them (pure; the real runs are in test_real_vllm_serve.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vllm_fit.logs.capacity import max_len_hint
from vllm_fit.logs.regime import Engine, Regime
from vllm_fit.outcome import CapacityFacts, Outcome

REGIMES = [Regime.of("0.6.3", Engine.V0), Regime.of("0.7.3", Engine.V1), Regime.of("0.10.2"),
           Regime.of("0.28.0"), Regime.of("0.32.0")]


@given(regime=st.sampled_from(REGIMES), blocks=st.integers(2, 5000), block_size=st.sampled_from([16, 32, 64, 128]),
       sequences=st.integers(1, 8))
def test_the_longest_length_for_n_sequences_is_what_the_pool_holds_n_of(regime, blocks, block_size, sequences):
    length = regime.servable_len(blocks, block_size, sequences=sequences)
    if length < 2:
        return
    assert regime.sequences_held(blocks, block_size, length) >= sequences or sequences == 1
    assert length <= regime.servable_len(blocks, block_size)
    longer = length + 1
    assert (regime.sequences_held(blocks, block_size, longer) < sequences
            or longer > regime.servable_len(blocks, block_size))
    assert regime.blocks_needed(length, block_size, sequences=sequences) <= blocks


@pytest.mark.parametrize("version, expected", [("0.32.0", 2433), ("0.28.0", 2433), ("0.7.3", 2561)])
def test_two_sequences_in_40_blocks_of_128(version, expected):
    regime = Regime.of(version)
    assert regime.servable_len(40, 128, sequences=2) == expected
    facts = CapacityFacts(num_blocks=40, block_size=128)
    assert max_len_hint(Outcome.OK, facts, regime, 128, sequences=2) == expected


def test_a_too_long_estimate_points_at_the_length_two_sequences_share():
    """0.32 estimates 4992 for 40 blocks (the null block counted); two sequences get 2433 of it."""
    facts = CapacityFacts(estimated_max_len=4992, block_size=128)
    assert max_len_hint(Outcome.KV_TOO_SMALL, facts, Regime.of("0.32.0"), 128, sequences=2) == 2433
    assert max_len_hint(Outcome.KV_TOO_SMALL, facts, Regime.of("0.32.0"), 128) == 4992
